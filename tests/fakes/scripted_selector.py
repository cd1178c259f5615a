"""A selector whose verdicts a test scripts: each judgement takes the next line of `<storage.dir>/verdicts.txt`.

With a fake provider both sides of a gate answer the same, so the paired scores cannot tell candidates apart; this
selector lets an end-to-end test walk a scenario through chosen verdicts (`accept`, `tie`, `lose`) without a model.
A missing or empty script is a tie.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

from reef.core.settings import Settings
from reef.learning.base import Selector

SCRIPT_FILE = "verdicts.txt"
_lock = threading.Lock()


class ScriptedSelector(Selector):
    def __init__(self, settings: Settings) -> None:
        self.script = Path(settings.storage.dir) / SCRIPT_FILE
        self._last = "tie"

    def _next(self) -> str:
        with _lock:
            lines = self.script.read_text().split() if self.script.exists() else []
            if not lines:
                return "tie"
            self.script.write_text("".join(line + "\n" for line in lines[1:]))
            return lines[0]

    def accept(self, candidate: Sequence[float], current: Sequence[float]) -> tuple[bool, str]:
        self._last = self._next()
        return self._last == "accept", f"scripted: {self._last}"

    def lost(self, candidate: Sequence[float], current: Sequence[float]) -> bool:
        return self._last == "lose"
