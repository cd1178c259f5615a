"""pi (npm @mariozechner/pi-coding-agent): `PI_CODING_AGENT_DIR=<root>/agent` holds AGENTS.md, skills… and a
`models.json` naming this Reef as OpenAI-chat provider `reef`; `PI_OFFLINE=1 pi --provider reef --model ID --mode
json --no-session -p TASK`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reef.harness.agents.base import Agent, Launch, scenario_headers, write_private

if TYPE_CHECKING:
    from reef.harness.binding import ModelBinding
    from reef.harness.tree import HarnessTree


def pi_models_json(binding: ModelBinding) -> dict[str, Any]:
    """pi's `models.json`: this Reef as provider `reef` speaking OpenAI chat completions."""
    model: dict[str, Any] = {"id": binding.model}
    if binding.max_tokens:
        model["maxTokens"] = binding.max_tokens
    provider = {
        "api": "openai-completions",
        "baseUrl": binding.base_url.rstrip("/") + "/v1",
        "apiKey": binding.api_key,
        "headers": scenario_headers(binding),
        "models": [model],
    }
    return {"providers": {"reef": provider}}


class Pi(Agent):
    name = "pi"

    def config_dir(self, root: Path) -> Path:
        return root / "agent"

    def launch(self, root: Path, binary: str, task: str, binding: ModelBinding, tree: HarnessTree) -> Launch:
        agent = self.config_dir(root)
        write_private(agent / "models.json", json.dumps(pi_models_json(binding), indent=2))
        command = [binary, "--provider", "reef", "--model", binding.model, "--mode", "json", "--no-session"]
        return Launch([*command, "-p", task], {"PI_OFFLINE": "1", "PI_CODING_AGENT_DIR": str(agent)})

    def final_answer(self, trajectory: list[dict[str, Any]]) -> str:
        for event in reversed(trajectory):
            message = event.get("message") if event.get("type") in ("message_end", "turn_end") else None
            if isinstance(message, dict) and message.get("role") == "assistant":
                content = message.get("content") or []
                return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
        return ""
