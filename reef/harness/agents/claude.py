"""Claude Code (npm @anthropic-ai/claude-code): `CLAUDE_CONFIG_DIR=<root>/agent` holds CLAUDE.md, skills,
commands and settings.json; it speaks Anthropic Messages (streamed `tool_use`) to this Reef through
`ANTHROPIC_BASE_URL`, every model alias pointing at the served model.

`claude -p TASK --output-format stream-json --verbose --dangerously-skip-permissions`: the episode's sandbox is
the permission boundary, and `IS_SANDBOX=1` declares it, since Claude Code otherwise refuses to skip permission
prompts as root. Non-essential traffic (telemetry, update checks, error reports) is switched off: the sandbox
has no network but the model's endpoint.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from reef.harness.agents.base import Agent, Launch, scenario_headers

if TYPE_CHECKING:
    from reef.harness.binding import ModelBinding
    from reef.harness.tree import HarnessTree


class ClaudeCode(Agent):
    name = "claude"

    def config_dir(self, root: Path) -> Path:
        return root / "agent"

    def launch(self, root: Path, binary: str, task: str, binding: ModelBinding, tree: HarnessTree) -> Launch:
        headers = "\n".join(f"{name}: {value}" for name, value in scenario_headers(binding).items())
        env = {
            "CLAUDE_CONFIG_DIR": str(self.config_dir(root)),
            "IS_SANDBOX": "1",
            "ANTHROPIC_BASE_URL": binding.base_url.rstrip("/"),
            "ANTHROPIC_API_KEY": binding.api_key,
            "ANTHROPIC_CUSTOM_HEADERS": headers,
            "ANTHROPIC_MODEL": binding.model,
            "ANTHROPIC_SMALL_FAST_MODEL": binding.model,
            "ANTHROPIC_DEFAULT_HAIKU_MODEL": binding.model,
            "ANTHROPIC_DEFAULT_SONNET_MODEL": binding.model,
            "ANTHROPIC_DEFAULT_OPUS_MODEL": binding.model,
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
        }
        if binding.max_tokens:
            env["CLAUDE_CODE_MAX_OUTPUT_TOKENS"] = str(binding.max_tokens)
        command = [binary, "-p", "--output-format", "stream-json", "--verbose", "--dangerously-skip-permissions"]
        return Launch([*command, "--model", binding.model, task], env)

    def final_answer(self, trajectory: list[dict[str, Any]]) -> str:
        for event in reversed(trajectory):
            if event.get("type") == "result":
                return str(event.get("result") or "")
        return ""
