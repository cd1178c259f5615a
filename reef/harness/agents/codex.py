"""The Codex CLI (npm @openai/codex): `CODEX_HOME=<root>/agent` holds AGENTS.md, prompts and a `config.toml`
naming this Reef as model provider `reef` over the Responses API (its token in `REEF_API_KEY`).

`codex exec --json --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox --ephemeral TASK`: the
episode's work directory is not a git repository (hence the skip flag), and the episode's sandbox replaces
Codex's own (which needs kernel features a nested sandbox lacks).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reef.harness.agents.base import Agent, Launch, scenario_headers, write_private

if TYPE_CHECKING:
    from reef.harness.binding import ModelBinding
    from reef.harness.tree import HarnessTree


def codex_config_toml(binding: ModelBinding) -> str:
    """Codex's config.toml binding it to this Reef (JSON strings are valid TOML basic strings)."""
    headers = ", ".join(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in scenario_headers(binding).items())
    lines = [
        f"model = {json.dumps(binding.model)}",
        'model_provider = "reef"',
        *([f"model_max_output_tokens = {int(binding.max_tokens)}"] if binding.max_tokens else []),
        "",
        "[model_providers.reef]",
        'name = "reef"',
        f"base_url = {json.dumps(binding.base_url.rstrip('/') + '/v1')}",
        'wire_api = "responses"',
        'env_key = "REEF_API_KEY"',
        f"http_headers = {{ {headers} }}",
    ]
    return "\n".join(lines) + "\n"


class Codex(Agent):
    name = "codex"

    def config_dir(self, root: Path) -> Path:
        return root / "agent"

    def launch(self, root: Path, binary: str, task: str, binding: ModelBinding, tree: HarnessTree) -> Launch:
        home = self.config_dir(root)
        write_private(home / "config.toml", codex_config_toml(binding))
        command = [binary, "exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"]
        command += ["--ephemeral", "--model", binding.model, task]
        return Launch(command, {"CODEX_HOME": str(home), "REEF_API_KEY": binding.api_key})

    def final_answer(self, trajectory: list[dict[str, Any]]) -> str:
        for event in reversed(trajectory):
            item = event.get("item") if event.get("type") == "item.completed" else None
            if isinstance(item, dict) and item.get("type") == "agent_message":
                return str(item.get("text") or "")
        return ""
