"""The search archive: every kept attempt with its lineage, and PUCT to choose the next parents.

Pure data: no I/O, no clock, no randomness; `to_json`/`from_json` round-trip it exactly, so it is committed with each
release (pending with the candidate, committed when the candidate publishes) and a crash neither loses nor
double-counts a step: `record` ignores a step the archive already holds.

Selection (PUCT, as in TTT-Discover), for each entry i:

    score_i = Q̂_i + c · P_i · sqrt(1 + T) / (1 + n_i)

- Q_i: the best reward in i's subtree (its own or a kept descendant's: max-child Q); Q̂ rescales Q to [0, 1] over
  the archive so c means the same on every problem,
- P_i: rank prior, (N − rank_i) / Σ_j (N − rank_j) with rank 0 the best reward,
- n_i: visits, every attempt made from i or from a descendant of i (backed up to ancestors); T: all attempts.
Lineage diversity: a step's parents are chosen greedily by score, skipping an entry that is an ancestor or a
descendant of one already chosen while others remain.

Expansion keeps at most `children_per_expansion` (2) valid children per parent per step, the best by reward. The
archive is bounded (`max_entries`): the worst non-seed entries go first; seeds are always kept.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from typing import Any


@dataclasses.dataclass(slots=True)
class Entry:
    """One kept attempt (or a seed). `reward` is higher-is-better (0 when invalid); `score` is the objective."""

    entry_id: str
    parent_id: str | None
    solution: str
    score: float | None
    reward: float
    valid: bool
    step: int
    details: str = ""
    visits: int = 0
    q: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True, slots=True)
class Attempt:
    """One scored attempt of a step, made from `parent_id` in cell (`group`, `rollout`) of the grid."""

    parent_id: str
    group: int
    rollout: int
    solution: str | None
    score: float | None
    reward: float
    valid: bool
    details: str = ""


class Archive:
    """Entries by id, the last step recorded and the total number of attempts."""

    def __init__(
        self,
        entries: Iterable[Entry],
        *,
        step: int = 0,
        total_visits: int = 0,
        max_entries: int = 64,
        exploration: float = 1.0,
        children_per_expansion: int = 2,
    ) -> None:
        self.entries: dict[str, Entry] = {e.entry_id: e for e in entries}
        self.step = step
        self.total_visits = total_visits
        self.max_entries = max_entries
        self.exploration = exploration
        self.children_per_expansion = children_per_expansion

    @classmethod
    def seeded(cls, seeds: Sequence[tuple[str, float | None, float, bool, str]], **settings: Any) -> Archive:
        """A fresh archive of seed solutions `(solution, score, reward, valid, details)`, ids `seed-0`, `seed-1`, …"""
        entries = [
            Entry(f"seed-{i}", None, solution, score, reward, valid, 0, details, 0, reward)
            for i, (solution, score, reward, valid, details) in enumerate(seeds)
        ]
        return cls(entries, **settings)

    # ---- selection -------------------------------------------------------------------------------------------

    def select(self, groups: int) -> list[Entry]:
        """The next step's `groups` parents by PUCT with lineage diversity (an entry repeats only when the archive
        has fewer than `groups` entries)."""
        ranked = sorted(self.entries.values(), key=lambda e: (-self.puct(e), e.entry_id))
        chosen: list[Entry] = []
        for entry in ranked:
            if len(chosen) == groups:
                break
            if not any(self._related(entry, other) for other in chosen):
                chosen.append(entry)
        for entry in ranked:  # not enough unrelated entries: fill with the best of the rest
            if len(chosen) < groups and entry not in chosen:
                chosen.append(entry)
        while ranked and len(chosen) < groups:
            chosen.append(ranked[len(chosen) % len(ranked)])
        return chosen

    def puct(self, entry: Entry) -> float:
        """Q̂ + c · P · sqrt(1 + T) / (1 + n) for `entry` (see the module docstring)."""
        rewards = [e.q for e in self.entries.values()]
        low, high = min(rewards), max(rewards)
        q_hat = (entry.q - low) / (high - low) if high > low else 0.0
        order = sorted(self.entries.values(), key=lambda e: (-e.reward, e.entry_id))
        size = len(order)
        prior = (size - order.index(entry)) / (size * (size + 1) / 2)
        return q_hat + self.exploration * prior * math.sqrt(1 + self.total_visits) / (1 + entry.visits)

    def _related(self, a: Entry, b: Entry) -> bool:
        return a.entry_id == b.entry_id or b.entry_id in self.lineage(a) or a.entry_id in self.lineage(b)

    def lineage(self, entry: Entry) -> list[str]:
        """The ids of `entry`'s ancestors still in the archive, nearest first."""
        found, parent = [], entry.parent_id
        while parent is not None and parent in self.entries and parent not in found:
            found.append(parent)
            parent = self.entries[parent].parent_id
        return found

    # ---- recording -------------------------------------------------------------------------------------------

    def record(self, step: int, attempts: Sequence[Attempt]) -> bool:
        """Fold one step's attempts in: visits backed up, the best valid children kept, Q backed up, bounded.

        False (and nothing changes) when `step` is not newer than the last step recorded."""
        if step <= self.step:
            return False
        by_parent: dict[str, list[Attempt]] = {}
        for attempt in attempts:
            by_parent.setdefault(attempt.parent_id, []).append(attempt)
        for parent_id, made in sorted(by_parent.items()):
            parent = self.entries.get(parent_id)
            for node in [parent, *(self.entries[i] for i in self.lineage(parent))] if parent else []:
                node.visits += len(made)
            self.total_visits += len(made)
            keep = sorted((a for a in made if a.valid and a.solution is not None), key=lambda a: -a.reward)
            for attempt in keep[: self.children_per_expansion]:
                self._add_child(step, attempt)
        self.step = step
        self._bound()
        return True

    def _add_child(self, step: int, attempt: Attempt) -> None:
        assert attempt.solution is not None
        child = Entry(
            f"s{step}-g{attempt.group}-r{attempt.rollout}",
            attempt.parent_id,
            attempt.solution,
            attempt.score,
            attempt.reward,
            attempt.valid,
            step,
            attempt.details,
            0,
            attempt.reward,
        )
        self.entries[child.entry_id] = child
        for ancestor_id in self.lineage(child):
            ancestor = self.entries[ancestor_id]
            ancestor.q = max(ancestor.q, child.reward)

    def _bound(self) -> None:
        removable = sorted(
            (e for e in self.entries.values() if e.step > 0), key=lambda e: (e.reward, e.step, e.entry_id)
        )
        for entry in removable[: max(0, len(self.entries) - self.max_entries)]:
            del self.entries[entry.entry_id]

    # ---- views -----------------------------------------------------------------------------------------------

    def top(self, limit: int = 20) -> list[Entry]:
        """The best entries by reward (ties: the older first)."""
        return sorted(self.entries.values(), key=lambda e: (-e.reward, e.step, e.entry_id))[:limit]

    def best(self) -> Entry:
        return self.top(1)[0]

    def to_json(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "total_visits": self.total_visits,
            "max_entries": self.max_entries,
            "exploration": self.exploration,
            "children_per_expansion": self.children_per_expansion,
            "entries": [e.to_json() for e in self.entries.values()],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Archive:
        return cls(
            (Entry(**e) for e in data["entries"]),
            step=int(data["step"]),
            total_visits=int(data["total_visits"]),
            max_entries=int(data["max_entries"]),
            exploration=float(data["exploration"]),
            children_per_expansion=int(data["children_per_expansion"]),
        )
