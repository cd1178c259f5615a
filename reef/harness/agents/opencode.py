"""opencode (npm opencode-ai): its config directory `<root>/home/.config/opencode` (also `OPENCODE_CONFIG_DIR`)
holds AGENTS.md, commands and `opencode.json`, where the tree's settings get this Reef as a custom
OpenAI-compatible provider `reef` (chat completions; `@ai-sdk/openai-compatible` ships inside opencode).

`opencode run --format json --auto -m reef/MODEL TASK`, with the model-list fetch, default plugins, LSP
downloads and update checks switched off: the sandbox has no network but the model's endpoint.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from reef.harness.agents.base import Agent, Launch, merged_json, scenario_headers, write_private

if TYPE_CHECKING:
    from reef.harness.binding import ModelBinding
    from reef.harness.tree import HarnessTree

OFFLINE = {
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_SHARE": "1",
}


class OpenCode(Agent):
    name = "opencode"

    def config_dir(self, root: Path) -> Path:
        return root / "home" / ".config" / "opencode"

    def launch(self, root: Path, binary: str, task: str, binding: ModelBinding, tree: HarnessTree) -> Launch:
        directory = self.config_dir(root)
        model: dict[str, Any] = {"name": binding.model}
        options = {
            "baseURL": binding.base_url.rstrip("/") + "/v1",
            "apiKey": binding.api_key,
            "headers": scenario_headers(binding),
        }
        provider = {"npm": "@ai-sdk/openai-compatible", "name": "reef", "options": options}
        binding_config = {
            "autoupdate": False,
            "share": "disabled",
            "model": f"reef/{binding.model}",
            "provider": {"reef": {**provider, "models": {binding.model: model}}},
        }
        write_private(directory / "opencode.json", merged_json(directory / "opencode.json", binding_config))
        command = [binary, "run", "--format", "json", "--auto", "-m", f"reef/{binding.model}", task]
        return Launch(command, {"OPENCODE_CONFIG_DIR": str(directory), **OFFLINE})

    def final_answer(self, trajectory: list[dict[str, Any]]) -> str:
        for event in reversed(trajectory):
            part = event.get("part") if event.get("type") == "text" else None
            if isinstance(part, dict):
                return str(part.get("text") or "")
        return ""
