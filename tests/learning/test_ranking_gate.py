"""The gate of score-only feedback: held-out scored rollouts, ranked by the candidate and by the serving release."""

from __future__ import annotations

from reef.core.records import Record
from reef.inference.base import RequestContext
from reef.learning.evaluation.holdout import is_held_out
from reef.learning.evaluation.ranking import RankedRollout, paired_ranking_scores, ranking_pairs
from reef.learning.gate import HeldOutTasks
from reef.recipes.rl import RLProcessor, RunningBaseline


def rollout(rid, score, group=None, completion=(7,)):
    return RankedRollout(rid, (1, 2), tuple(completion), score, group)


def test_pairs_are_taken_within_a_group_better_first_and_skip_equal_scores():
    rollouts = [rollout("a", 1.0, "x"), rollout("b", 0.0, "x"), rollout("c", 1.0, "x"), rollout("d", 0.5, "y")]

    pairs = ranking_pairs(rollouts)

    assert [(hi.rollout_id, lo.rollout_id) for hi, lo in pairs] == [("a", "b"), ("c", "b")]


def test_many_pairs_are_thinned_to_the_same_subset_each_time():
    rollouts = [rollout(f"r{i:02d}", float(i)) for i in range(30)]  # 435 pairs

    first, again = ranking_pairs(rollouts, max_pairs=20), ranking_pairs(list(reversed(rollouts)), max_pairs=20)

    assert len(first) == 20 and first == again


class PreferringEngine:
    """Scores a completion by a per-context table: completion id → mean log-probability."""

    def __init__(self, tables):
        self.tables = tables
        self.calls = []

    async def score(self, prompt_ids, completion_ids, ctx):
        self.calls.append((tuple(completion_ids), ctx.release_id))
        return [self.tables[ctx.release_id][completion_ids[0]]] * len(completion_ids)


async def test_each_side_scores_a_pair_one_when_it_gives_the_better_completion_the_higher_log_probability():
    good, bad = rollout("good", 1.0, completion=(1, 1)), rollout("bad", 0.0, completion=(2,))
    engine = PreferringEngine({"candidate": {1: -0.5, 2: -1.0}, "serving": {1: -2.0, 2: -1.0}})
    pairs = ranking_pairs([good, bad])

    candidate, current = await paired_ranking_scores(
        engine, pairs, RequestContext("s", "candidate"), RequestContext("s", "serving")
    )

    assert candidate == [1.0] and current == [0.0]
    assert len(engine.calls) == 4  # each rollout once on each side


def test_rl_holds_out_scored_rollouts_by_report_id_and_trains_on_the_rest():
    processor = RLProcessor(units_per_batch=1, new_baseline=lambda: RunningBaseline(0.9, 0.1), baseline_by="task")
    processor.hold_out(4)
    held, trained = [], []
    for number in range(40):
        capture = {"prompt_token_ids": [1, 2], "completion_token_ids": [3, number + 4], "logprobs": [-0.1, -0.2]}
        inference = Record.new("s", "inference", {"dialect": "chat", "training": capture}, created_at=0.0)
        report_id = f"rep-{number}"
        payload = {"score": float(number % 2), "references": [inference.agent_record_id], "metadata": {"task": "t"}}
        processor.ingest(inference)
        processor.ingest(Record.new("s", "report", payload, created_at=0.0, agent_record_id=report_id))
        (held if is_held_out(report_id, 4) else trained).append(report_id)

    gate = HeldOutTasks().update(processor.gate_tasks())

    assert [r.rollout_id for r in gate.rankings] == held and held
    assert processor.ready() == len(trained)
    assert gate.source == "held_out" and gate.size() == len(gate.pairs) > 0
    assert all(r.group == "t" and len(r.completion_ids) == 2 for r in gate.rankings)


def test_without_an_engine_that_scores_rl_holds_nothing_out():
    processor = RLProcessor(units_per_batch=1, new_baseline=lambda: RunningBaseline(0.9, 0.1))
    processor.hold_out(1, rollouts=False)
    capture = {"prompt_token_ids": [1], "completion_token_ids": [3], "logprobs": [-0.1]}
    inference = Record.new("s", "inference", {"dialect": "chat", "training": capture}, created_at=0.0)
    processor.ingest(inference)
    processor.ingest(
        Record.new("s", "report", {"score": 1.0, "references": [inference.agent_record_id]}, created_at=0.0)
    )

    assert processor.gate_tasks() == [] and processor.ready() == 1
