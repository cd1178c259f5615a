"""The judge worker against a real HTTP endpoint (the fake provider): votes and hints from replies, and a judge
that answers 500 or times out marks itself down and delivers nothing, until it answers again."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from reef.judge.base import Judge, JudgeRequest, Vote
from reef.judge.judges import EndpointJudge, JudgeSettings
from reef.judge.worker import JudgeWorker
from tests.fakes.upstream import FakeUpstream, start_fake_upstream

REQUEST = JudgeRequest(
    "rec_turn", ({"role": "user", "content": "capital of France?"},), "Well, it is Paris.", {"role": "user",
    "content": "too long!"}, "rec_next", "s1",
)  # fmt: skip


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeUpstream]:
    fake = start_fake_upstream()
    yield fake
    fake.stop()


def endpoint(upstream: FakeUpstream, model: str, **config) -> tuple[EndpointJudge, JudgeSettings]:
    settings = JudgeSettings.from_config({"judge_url": f"{upstream.url}/v1", "judge_model": model, **config})
    return EndpointJudge(settings), settings


class Delivered:
    def __init__(self) -> None:
        self.records: list = []

    async def __call__(self, records: list) -> None:
        self.records.extend(records)


async def test_an_endpoint_judge_sends_the_documented_prompt_and_its_reply_becomes_a_verdict(upstream) -> None:
    judge, settings = endpoint(upstream, "fake-model", votes=3, judge_api_key_env="REEF_TEST_JUDGE_KEY")
    worker = JudgeWorker("s", judge, settings)
    delivered = Delivered()

    assert await worker.judge_round([REQUEST], delivered) is False

    (record,) = delivered.records
    verdict = record.payload["metadata"]["judge"]
    # The fake echoes the prompt, which asks for a boxed score it does not give: every vote is garbage, so 0.
    assert verdict["votes"] == [0, 0, 0] and verdict["reward"] == 0 and record.payload["score"] == 0
    assert record.references() == ["rec_turn"] and record.agent_record_id == "judge-rec_turn"
    sent = upstream.received[-1].json()
    assert sent["model"] == "fake-model" and sent["messages"][0]["role"] == "system"
    assert "NEXT STATE [user]:\ntoo long!" in sent["messages"][1]["content"]
    await judge.aclose()


@pytest.mark.parametrize(("model", "config", "error"), [
    ("error-500", {}, "HTTPStatusError"),
    ("slow-2", {"judge_timeout_s": 0.2}, "no answer within 0.2 s"),
])  # fmt: skip
async def test_a_judge_that_answers_500_or_times_out_is_down_and_loses_no_turn(upstream, model, config, error) -> None:
    judge, settings = endpoint(upstream, model, votes=2, judge_retries=1, **config)
    worker = JudgeWorker("s", judge, settings)
    delivered = Delivered()

    assert await worker.judge_round([REQUEST], delivered) is True

    assert delivered.records == []
    assert worker.blocker() is not None and "learning is paused" in worker.blocker()
    status = worker.status()
    assert status["state"] == "down" and error in status["error"] and status["consecutive_failures"] == 1
    await judge.aclose()

    worker.judge, _ = endpoint(upstream, "fake-model")  # it answers again
    assert await worker.judge_round([REQUEST], delivered) is False
    assert [r.references() for r in delivered.records] == [["rec_turn"]]
    assert worker.blocker() is None and worker.status()["state"] == "idle"
    await worker.judge.aclose()


class Scripted(Judge):
    name = "scripted"

    def __init__(self, votes: list[Vote]) -> None:
        self.votes = list(votes)

    async def vote(self, request: JudgeRequest) -> Vote:
        return self.votes.pop(0)


async def test_the_hints_of_the_minus_one_votes_are_kept_deduplicated_shortest_first() -> None:
    votes = [Vote(-1, "Answer in one word."), Vote(1), Vote(-1, "answer in one  word."), Vote(-1, "Just: Paris.")]
    settings = JudgeSettings.from_config({"judge_function": "json:dumps", "votes": 4})
    verdict = await JudgeWorker("s", Scripted(votes), settings).verdict(REQUEST)
    assert verdict.votes == (-1, 1, -1, -1) and verdict.reward == -1
    assert verdict.hints == ("Just: Paris.", "Answer in one word.")
