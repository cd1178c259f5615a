"""The openclawrl recipe: turns become units once their next state came and was judged; a client's score
overrides the judge; a restart trains no turn twice; a judge that does not answer pauses learning, losing nothing."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

from reef.core.errors import BadRequest
from reef.core.records import Record
from reef.core.settings import LearningSettings, Settings
from reef.judge.base import Verdict
from reef.learning.report import parse_report
from reef.recipes.openclawrl import OpenClawRLRecipe
from tests.fakes.learning_world import Crash, consumed_steps, make_settings, open_world, started
from tests.fakes.session_judge import JUDGE, TurnTrainingBackend, turn_record

JUDGE_FUNCTION = "tests.fakes.session_judge:rule_judge"


def user(text: str) -> dict:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict:
    return {"role": "assistant", "content": text}


def recipe(batch_size: int = 2, **config) -> OpenClawRLRecipe:
    config = {"judge_function": JUDGE_FUNCTION, **config}
    return OpenClawRLRecipe(Settings(learning=LearningSettings(batch_size=batch_size, recipe_config=config)))


def verdict(turn: Record, reward: int, hints: tuple[str, ...] = ()) -> Record:
    return Verdict(turn.agent_record_id, (reward,) * 3, reward, hints, "test", user("…"), "next", "s").record(
        turn.scenario, turn.created_at + 1
    )


def report(turn: Record, score: float) -> Record:
    return Record.new(turn.scenario, "report", {"score": score, "references": [turn.agent_record_id]}, 0.0)


def conversation(scenario: str = "math", session: str | None = None) -> list[Record]:
    """Two turns of one session: the user complains about the first answer, then moves on."""
    first = turn_record(scenario, [user("capital of France?")], "Well, the capital of France is Paris.", session)
    second = turn_record(
        scenario,
        [user("capital of France?"), assistant("Well, the capital of France is Paris."), user("too long!")],
        "Paris.",
        session,
    )
    return [first, second]


# ---- the processor (pure) ------------------------------------------------------------------------------------


def test_a_turn_is_due_for_the_judge_once_its_next_state_came_and_a_unit_once_judged() -> None:
    processor = recipe(batch_size=1).processor()
    first, second = conversation()
    processor.ingest(first)
    assert processor.due() == [] and processor.ready() == 0  # no next state yet

    processor.ingest(second)
    (due,) = processor.due()
    assert due.turn_id == first.agent_record_id and due.next_state == user("too long!")
    assert due.answer == "Well, the capital of France is Paris."

    processor.ingest(verdict(first, -1, ("Answer in one word.",)))
    assert processor.due() == [] and processor.ready() == 1
    batch = processor.build_batch()
    assert batch is not None
    (sample,) = batch.samples
    assert sample["advantage"] == -1 and sample["weight"] == 1.0 and sample["old_logprobs"] == [-0.5, -0.7]
    assert "Answer in one word." in sample["teacher_messages"][-1]["content"]
    assert set(batch.record_ids) == {first.agent_record_id, f"judge-{first.agent_record_id}"}


def test_after_a_restart_a_consumed_next_request_still_gives_an_unjudged_turn_its_next_state() -> None:
    processor = recipe(batch_size=1).processor()
    first, second = conversation()
    processor.ingest(first)
    processor.observe(second)  # trained (consumed) already: history only
    (due,) = processor.due()
    assert due.turn_id == first.agent_record_id and processor.ready() == 0
    processor.ingest(verdict(second, 1))  # a verdict on a consumed turn is consumed untrained
    assert processor.skipped["turn_not_held"] == 1


def test_a_turn_without_a_hint_is_trained_by_the_policy_gradient_alone() -> None:
    processor = recipe(batch_size=1).processor()
    first, second = conversation()
    for record in (first, second, verdict(first, 1)):
        processor.ingest(record)
    batch = processor.build_batch()
    assert batch is not None
    (sample,) = batch.samples
    assert sample["advantage"] == 1 and sample["weight"] == 0.0 and "teacher_messages" not in sample


def test_a_clients_score_on_the_same_receipt_overrides_the_judges_vote() -> None:
    processor = recipe(batch_size=1).processor()
    first, second = conversation()
    scored = report(first, 0.5)
    for record in (first, second, scored):
        processor.ingest(record)
    assert processor.due() == []  # scored: nothing left for the judge
    processor.ingest(verdict(first, -1))
    batch = processor.build_batch()
    assert batch is not None
    assert batch.samples[0]["advantage"] == 0.5
    assert scored.agent_record_id in batch.record_ids


def test_a_turn_whose_session_expires_without_a_next_state_is_consumed_untrained() -> None:
    processor = recipe(batch_size=1, session_ttl_s=10).processor()
    lonely = turn_record("math", [user("hello?")], "Hi.", "s1", created_at=100.0)
    first, second = (
        turn_record(
            "math",
            r.payload["request"]["messages"],
            r.payload["response"]["choices"][0]["message"]["content"],
            "s2",
            created_at=500.0 + i,
        )  # fmt: skip
        for i, r in enumerate(conversation())
    )
    for record in (lonely, first, second, verdict(first, 1)):
        processor.ingest(record)
    batch = processor.build_batch()
    assert batch is not None and [s["turn_id"] for s in batch.samples] == [first.agent_record_id]
    assert lonely.agent_record_id in batch.record_ids and processor.skipped["no_next_state"] == 1


def test_a_judge_config_with_neither_url_nor_function_is_refused_naming_the_field() -> None:
    with pytest.raises(BadRequest) as error:
        OpenClawRLRecipe(Settings(learning=LearningSettings(recipe_config={})))
    assert error.value.field == "recipe_config.judge_url"
    with pytest.raises(BadRequest) as error:
        recipe(judge_function="no.such.module:judge")
    assert error.value.field == "recipe_config.judge_function"
    with pytest.raises(BadRequest) as error:
        OpenClawRLRecipe(Settings(learning=LearningSettings(recipe_config={"judge_url": "http://127.0.0.1:1"})))
    assert error.value.field == "recipe_config.judge_model"
    with pytest.raises(BadRequest) as error:
        recipe(votes=0)
    assert error.value.field == "recipe_config.votes"


@pytest.mark.e2e  # runs `reef serve` (which refuses to start)
def test_reef_serve_exits_2_naming_the_judge_key_when_no_judge_is_configured(tmp_path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "reef.cli.main", "serve", "--inference.upstream-url", "http://127.0.0.1:9",
         "--learning.recipe", "openclawrl", "--storage.dir", str(tmp_path)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert "learning.recipe_config.judge_url" in result.stderr


def test_a_clients_report_cannot_pose_as_a_judge_verdict() -> None:
    with pytest.raises(BadRequest) as error:
        parse_report(recipe(), {"references": ["rec_1"], "metadata": {"judge": {"reward": 1}}})
    assert error.value.field == "metadata.judge"
    parse_report(recipe(), {"score": 1})  # cites no turn: stored, and skipped


def test_a_report_citing_no_turn_is_counted_as_skipped_with_its_reason() -> None:
    processor = recipe().processor()
    processor.ingest(Record.new("math", "report", {"score": 1.0}, 0.0))
    assert processor.ready() == 0 and processor.skipped_counts() == {"no_references": 1}


# ---- a running learner (real SQLite, git, commit log; fake engine and training) ------------------------------


def openclawrl_world(root, backend: TurnTrainingBackend, batch_size: int = 2):
    settings = make_settings(root, policy="always", batch_size=batch_size)
    learning = settings.learning.model_copy(
        update={"recipe": "openclawrl", "recipe_config": {"judge_function": JUDGE_FUNCTION, "judge_retries": 0}}
    )
    return open_world(root, settings.model_copy(update={"learning": learning}), OpenClawRLRecipe, backend)


def two_sessions(world) -> list[Record]:
    """Two interleaved tagged sessions of two turns each: four turns, the first of each session judged later."""
    a1, a2 = conversation(session="a")
    b1, b2 = conversation(session="b")
    stored = world.records.append([a1, b1, a2, b2])
    world.runtime.notify("math")
    return stored


async def until(condition, what: str, attempts: int = 400) -> None:
    for _ in range(attempts):
        if condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"never happened: {what}")


def learner(world):
    return world.runtime.scenarios.learners["math"]


async def test_a_restart_in_the_middle_of_a_batch_trains_no_turn_twice(tmp_path) -> None:
    class CrashingBackend(TurnTrainingBackend):
        def run(self, job, progress=None):
            self.jobs.append(job)
            raise Crash("killed mid-training")

    JUDGE.mode = "ok"
    world = await started(openclawrl_world(tmp_path, CrashingBackend()))
    a1, b1, a2, b2 = two_sessions(world)
    await until(lambda: learner(world)._processor.ready() == 2, "both first turns judged")
    with pytest.raises(Crash):
        await world.runtime.step("math")
    await world.runtime.stop()
    calls = JUDGE.calls

    backend = TurnTrainingBackend()
    world = world.restart(backend=backend)
    await world.runtime.start()
    await until(lambda: learner(world)._processor.ready() == 2, "the judged turns ready again")
    assert JUDGE.calls == calls  # their stored verdicts are used, not judged again
    first = await world.runtime.step("math")
    assert first is not None and first["verdict"] == "published"
    # The second turns of both sessions get their next states now, and the next step trains them.
    world.records.append(
        [turn_record("math", [*r.payload["request"]["messages"], assistant("Paris."), user("thanks")], "ok", s)
         for r, s in ((a2, "a"), (b2, "b"))]
    )  # fmt: skip
    world.runtime.notify("math")
    await until(lambda: learner(world)._processor.ready() == 2, "the second turns judged")
    second = await world.runtime.step("math")
    assert second is not None and second["verdict"] == "published"
    await world.runtime.stop()

    world = world.restart(backend=TurnTrainingBackend())
    await world.runtime.start()
    assert await world.runtime.step("math") is None  # nothing is left to train after another restart
    await world.runtime.stop()
    assert world.backend.jobs == []
    assert [sorted(s["turn_id"] for s in job.samples) for job in backend.jobs] == [
        sorted([a1.agent_record_id, b1.agent_record_id]),
        sorted([a2.agent_record_id, b2.agent_record_id]),
    ]
    steps = consumed_steps(world)
    assert steps[a1.agent_record_id] == steps[f"judge-{a1.agent_record_id}"] == first["step"]
    assert steps[a2.agent_record_id] == steps[f"judge-{b2.agent_record_id}"] == second["step"]


async def test_a_judge_that_does_not_answer_pauses_learning_without_losing_turns(tmp_path) -> None:
    JUDGE.mode, JUDGE.calls = "raise", 0
    backend = TurnTrainingBackend()
    world = await started(openclawrl_world(tmp_path, backend))
    a1, b1, _, _ = two_sessions(world)
    await until(lambda: learner(world).status().get("computed_feedback", {}).get("state") == "down", "judge down")

    status = world.runtime.status()["scenarios"]["math"]
    assert "judge does not answer" in status["blocked"] and "no turn is lost" in status["blocked"]
    assert status["computed_feedback"]["error"].startswith("JudgeUnavailable")
    commit = await world.runtime.step("math")
    assert commit is None or commit["verdict"] == "skipped"
    assert backend.jobs == [] and set(consumed_steps(world).values()) == {None}

    JUDGE.mode = "ok"
    await until(lambda: learner(world)._processor.ready() == 2, "the judge answers again", attempts=1200)
    assert learner(world).status()["computed_feedback"]["state"] != "down"
    commit = await world.runtime.step("math")
    await world.runtime.stop()
    assert commit is not None and commit["verdict"] == "published"
    assert sorted(backend.trained_turns()) == sorted([a1.agent_record_id, b1.agent_record_id])
    verdicts = [r for r in world.records.page("math", 0, 100) if r.agent_record_id.startswith("judge-")]
    assert sorted(r.references()[0] for r in verdicts) == sorted([a1.agent_record_id, b1.agent_record_id])
    assert all(r.score() == -1 for r in verdicts)  # "too long!" was the next state of both
