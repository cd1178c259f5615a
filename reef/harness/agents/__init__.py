"""The coding agents whose episodes the gate runs: for each, where it reads its harness, how it is bound to this
Reef in the dialect it speaks, its non-interactive command line, and how its final answer is read back.

One module per agent (`pi`, `claude`, `codex`, `opencode`); `AGENTS` maps an adapter name to its agent.
"""

from __future__ import annotations

from reef.harness.agents.base import Agent, Launch, agent_env
from reef.harness.agents.claude import ClaudeCode
from reef.harness.agents.codex import Codex
from reef.harness.agents.opencode import OpenCode
from reef.harness.agents.pi import Pi

AGENTS: dict[str, Agent] = {agent.name: agent for agent in (Pi(), ClaudeCode(), Codex(), OpenCode())}

__all__ = ["AGENTS", "Agent", "Launch", "agent_env"]
