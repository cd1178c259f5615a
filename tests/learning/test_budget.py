"""The learner's own upstream spending is bounded per scenario over a sliding hour: past the bound it pauses with
`blocked: "budget: …"` and resumes once the window allows (an injected clock; nothing sleeps)."""

from __future__ import annotations

from typing import Any

from reef.core.scenarios import Dialect
from reef.core.settings import LearningSettings
from reef.inference.base import Completion, RequestContext
from reef.learning.budget import MeteredEngine, UpstreamBudget, usage_tokens
from tests.fakes.dict_engine import DictEngine
from tests.fakes.learning_world import QUESTIONS, make_settings, open_world, started

Q = list(QUESTIONS)


class Clock:
    def __init__(self) -> None:
        self.now_s = 1000.0

    def __call__(self) -> float:
        return self.now_s


def test_usage_is_read_in_either_dialect() -> None:
    assert usage_tokens({"total_tokens": 30, "prompt_tokens": 10}) == 30
    assert usage_tokens({"prompt_tokens": 10, "completion_tokens": 5}) == 15
    assert usage_tokens({"input_tokens": 7, "output_tokens": 3}) == 10
    assert usage_tokens(None) == 0 and usage_tokens({"total_tokens": True}) == 0


def test_the_window_slides_and_says_when_it_resumes() -> None:
    clock = Clock()
    budget = UpstreamBudget(100, clock)
    budget.spend("s", 60)
    clock.now_s += 1800
    budget.spend("s", 50)
    blocked = budget.blocker("s")
    assert blocked is not None and blocked.startswith("budget: 110") and "resumes in 1800 s" in blocked
    assert budget.blocker("other") is None  # per scenario
    clock.now_s += 1800  # the first 60 age out
    assert budget.blocker("s") is None and budget.spent("s") == 50
    assert UpstreamBudget(0, clock).blocker("s") is None  # 0: no limit


class UsageEngine(DictEngine):
    async def complete(self, dialect: Dialect, body: dict[str, Any], ctx: RequestContext) -> Completion:
        completion = await super().complete(dialect, body, ctx)
        return Completion(200, completion.raw, completion.body, completion.request, usage={"total_tokens": 42})


async def test_the_learners_own_engine_calls_are_counted_against_their_scenario() -> None:
    budget = UpstreamBudget(1000, Clock())
    engine = MeteredEngine(UsageEngine(), budget)
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    await engine.complete(Dialect.CHAT, body, RequestContext("metered"))
    assert budget.spent("metered") == 42 and budget.spent("other") == 0


async def test_a_spent_budget_pauses_the_learner_and_it_resumes_when_the_window_allows(tmp_path) -> None:
    clock = Clock()
    settings = make_settings(tmp_path)
    settings = settings.model_copy(
        update={"learning": LearningSettings(**{**settings.learning.model_dump(), "max_upstream_tokens_per_hour": 500})}
    )
    budget = UpstreamBudget(500, clock)
    world = await started(open_world(tmp_path, settings, budget=budget))
    try:
        for q in Q[:2]:
            world.report("math", q, QUESTIONS[q])
        budget.spend("math", 600)  # what the proposer, the judge and the episodes spent this hour

        paused = await world.runtime.step("math")
        assert paused is not None and paused["verdict"] == "skipped" and paused["reason"].startswith("budget: 600")
        status = world.runtime.status()["scenarios"]["math"]
        assert status["blocked"].startswith("budget: ")

        clock.now_s += 3601  # the spending ages out of the hour
        resumed = await world.runtime.step("math")
        assert resumed is not None and resumed["verdict"] == "published"
        assert world.runtime.status()["scenarios"]["math"]["blocked"] is None
    finally:
        await world.runtime.stop()


async def test_a_gate_episodes_requests_over_v1_count_and_other_traffic_does_not(tmp_path) -> None:
    import httpx

    from reef.application.runtime import Runtime
    from reef.core.episode_tokens import EpisodeKey
    from reef.core.settings import Settings, StorageSettings
    from reef.releases.commit_log import FileCommitLog
    from reef.releases.git import open_release_store
    from reef.service.app import create_app
    from reef.storage.sql import open_record_store

    settings = Settings(storage=StorageSettings(dir=tmp_path / "state"))
    records = open_record_store("sqlite", directory=tmp_path / "records")
    releases = open_release_store(str(tmp_path / "releases.git"), tmp_path / "release-work")
    engine = UsageEngine()
    runtime = Runtime(settings, records, releases, FileCommitLog(tmp_path / "commits"), engine)
    edge = create_app(settings, runtime, engine)
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=edge), base_url="http://reef.test") as http:
        user = await http.post("/v1/chat/completions", json=body, headers={"x-reef-scenario": "ep"})
        token = EpisodeKey.for_settings(settings).mint("ep", "e1-task-candidate", 60)
        episode_headers = {"x-reef-scenario": "ep", "authorization": f"Bearer {token}"}
        episode = await http.post("/v1/chat/completions", json=body, headers=episode_headers)
    records.close()
    assert user.status_code == episode.status_code == 200
    assert runtime.budget.spent("ep") == 42


async def test_an_endpoint_judges_usage_is_handed_to_the_meter() -> None:
    import httpx

    from reef.judge.base import JudgeRequest
    from reef.judge.judges import EndpointJudge, JudgeSettings

    def answer(request: httpx.Request) -> httpx.Response:
        reply = {"choices": [{"message": {"content": "VOTE: 1"}}], "usage": {"total_tokens": 17}}
        return httpx.Response(200, json=reply)

    judge = EndpointJudge(JudgeSettings(url="http://judge.test", model="j"))
    judge._client = httpx.AsyncClient(base_url="http://judge.test", transport=httpx.MockTransport(answer))
    budget = UpstreamBudget(1000, Clock())
    judge.meter(lambda usage: budget.spend("judged", usage_tokens(usage)))
    await judge.vote(JudgeRequest("t1", ({"role": "user", "content": "q"},), "a", {"role": "user"}, "r2", "s"))
    await judge.aclose()
    assert budget.spent("judged") == 17
