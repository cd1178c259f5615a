"""The gate of score-only feedback: does the candidate rank held-out rollouts by their scores better than the
serving release does?

A score-only recipe (`rl`) has no known answer to compare a candidate's text with. What it has are held-out
rollouts — the served model's own completions — with the scores their reports gave. For every pair of held-out
rollouts of one group (`metadata[baseline_by]`, or all of them) whose scores differ, each side of the gate
"ranks the pair right" when it gives the better-scored completion the higher mean per-token log-probability
(teacher-forced on the recorded tokens, `Engine.score`). The pair scores 1 or 0 for the candidate and for the
serving release, so the paired vectors go through the same selection policy as task scores: a candidate that
ranks more held-out pairs right has moved its distribution towards what the scores reward, on rollouts it was
never trained on.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from collections.abc import Sequence
from typing import Any

from reef.core.errors import BadRequest
from reef.inference.base import Engine, RequestContext

MAX_PAIRS = 64  # per gate; chosen deterministically (by rollout ids) when there are more


@dataclasses.dataclass(frozen=True, slots=True)
class RankedRollout:
    """A held-out rollout: its recorded tokens, the score its report gave, and the group it is compared within."""

    rollout_id: str
    prompt_ids: tuple[int, ...]
    completion_ids: tuple[int, ...]
    score: float
    group: str | None

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> RankedRollout:
        """A `{"id", "checker": "ranking", "prompt_ids", "completion_ids", "score", "group"}` row; BadRequest if bad."""
        where = f"held-out report {row.get('id')}"
        for name in ("prompt_ids", "completion_ids"):
            value = row.get(name)
            if not isinstance(value, list) or not value or not all(isinstance(i, int) for i in value):
                raise BadRequest("must be a non-empty list of token ids", field=f"{where}.{name}")
        score = row.get("score")
        if isinstance(score, bool) or not isinstance(score, int | float):
            raise BadRequest("must be a number", field=f"{where}.score")
        group = row.get("group")
        return cls(
            str(row["id"]),
            tuple(row["prompt_ids"]),
            tuple(row["completion_ids"]),
            float(score),
            None if group is None else str(group),
        )


def ranking_pairs(
    rollouts: Sequence[RankedRollout], max_pairs: int = MAX_PAIRS
) -> list[tuple[RankedRollout, RankedRollout]]:
    """`(better, worse)` pairs of one group with different scores; at most `max_pairs`, the same ones each time."""
    pairs = [
        (a, b) if a.score > b.score else (b, a)
        for a, b in itertools.combinations(sorted(rollouts, key=lambda r: r.rollout_id), 2)
        if a.group == b.group and a.score != b.score
    ]
    if len(pairs) <= max_pairs:
        return pairs
    stride = len(pairs) / max_pairs
    return [pairs[int(index * stride)] for index in range(max_pairs)]


async def paired_ranking_scores(
    engine: Engine,
    pairs: Sequence[tuple[RankedRollout, RankedRollout]],
    candidate: RequestContext,
    current: RequestContext,
    max_parallel: int = 4,
) -> tuple[list[float], list[float]]:
    """Per pair: 1.0 where the side gives the better completion the higher mean log-probability, else 0.0."""
    rollouts = {r.rollout_id: r for pair in pairs for r in pair}
    limit = asyncio.Semaphore(max_parallel)

    async def mean_logprob(rollout: RankedRollout, ctx: RequestContext) -> float:
        async with limit:
            logprobs = await engine.score(list(rollout.prompt_ids), list(rollout.completion_ids), ctx)
        return sum(logprobs) / len(logprobs)

    async def both(rollout: RankedRollout) -> tuple[str, float, float]:
        on_candidate, on_current = await asyncio.gather(
            mean_logprob(rollout, candidate), mean_logprob(rollout, current)
        )
        return rollout.rollout_id, on_candidate, on_current

    scored = {rid: (c, k) for rid, c, k in await asyncio.gather(*(both(r) for r in rollouts.values()))}
    candidate_scores = [float(scored[hi.rollout_id][0] > scored[lo.rollout_id][0]) for hi, lo in pairs]
    current_scores = [float(scored[hi.rollout_id][1] > scored[lo.rollout_id][1]) for hi, lo in pairs]
    return candidate_scores, current_scores
