"""Agents' own proposals (`POST /reef/harness/proposals`), queued durably for the next evolution step.

One fsync'd JSON-lines file per scenario under `<storage.dir>/harness-proposals/`. A proposal is consumed when a
learner step names its id in the step's metrics (`proposal_ids`), whatever the verdict, so it is tried once.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from reef.core.scenarios import validate_scenario_name
from reef.core.settings import Settings


class ProposalQueue:
    """Append-only proposals per scenario."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self._lock = threading.Lock()

    @classmethod
    def for_settings(cls, settings: Settings) -> ProposalQueue:
        return cls(Path(settings.storage.dir).expanduser() / "harness-proposals")

    def path(self, scenario: str) -> Path:
        return self.directory / f"{validate_scenario_name(scenario, field='scenario').replace(':', '%3A')}.jsonl"

    def append(
        self, scenario: str, mutations: list[dict[str, Any]], reason: str, session: str | None = None
    ) -> dict[str, Any]:
        """Queue a proposal (already validated); returns it with its `proposal_id`."""
        proposal: dict[str, Any] = {
            "proposal_id": "prop_" + uuid.uuid4().hex[:16],
            "mutations": mutations,
            "reason": reason,
            "created_at": time.time(),
        }
        if session is not None:
            proposal["session"] = session
        line = json.dumps(proposal, separators=(",", ":"), sort_keys=True).encode() + b"\n"
        path = self.path(scenario)
        with self._lock:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line)
                os.fsync(fd)
            finally:
                os.close(fd)
        return proposal

    def pending(self, scenario: str, consumed: set[str]) -> list[dict[str, Any]]:
        """Proposals not yet consumed, oldest first (a torn last line is ignored)."""
        path = self.path(scenario)
        if not path.exists():
            return []
        found = []
        for raw in path.read_bytes().splitlines():
            try:
                proposal = json.loads(raw)
            except ValueError:
                continue
            if proposal.get("proposal_id") not in consumed:
                found.append(proposal)
        return found
