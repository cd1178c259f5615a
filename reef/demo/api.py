"""What the demo asks of a running Reef, over its public HTTP API only (docs/reference/http-api.md)."""

from __future__ import annotations

import asyncio
import dataclasses
import math
import statistics
import time
from collections.abc import Sequence
from typing import Any

import httpx

from reef.demo.tasks import DemoTask, is_exact, partial_credit


@dataclasses.dataclass(frozen=True, slots=True)
class Answer:
    """One served completion: its text, its receipt and the release that served it."""

    task: DemoTask
    text: str
    receipt: str
    release_id: str | None


@dataclasses.dataclass(frozen=True, slots=True)
class Measurement:
    """A held-out score: exact match and partial credit, overall and per task family."""

    exact: float
    partial: float
    by_family: dict[str, float]
    release_id: str | None
    wall_s: float
    # 95% intervals over the test tasks: Wilson for exact match, a normal interval of the mean for partial credit.
    exact_ci95: tuple[float, float] = (0.0, 1.0)
    partial_ci95: tuple[float, float] = (0.0, 1.0)
    # The openclawrl demo: the share of answers its simulated user accepts (Wilson interval).
    acceptance: float | None = None
    acceptance_ci95: tuple[float, float] = (0.0, 1.0)

    def score(self, metric: str) -> float:
        """The figure `metric` (`exact`, `partial` or `acceptance`) names."""
        if metric == "acceptance":
            return self.acceptance or 0.0
        return self.partial if metric == "partial" else self.exact

    def interval(self, metric: str) -> tuple[float, float]:
        """The 95% interval of `score(metric)`."""
        if metric == "acceptance":
            return self.acceptance_ci95
        return self.partial_ci95 if metric == "partial" else self.exact_ci95

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True, slots=True)
class StepOutcome:
    """How the learner ended a step: its commit (None when the wait ran out, or `starved`: the nudges ran out and
    the learner still had no full batch)."""

    commit: dict[str, Any] | None
    waited_s: float
    starved: bool = False

    @property
    def verdict(self) -> str:
        if self.commit:
            return str(self.commit.get("verdict"))
        return "starved" if self.starved else "timeout"


class ReefAPI:
    """The calls the demo makes, all scoped to one scenario."""

    def __init__(self, url: str, scenario: str, timeout_s: float = 600.0, token: str | None = None) -> None:
        headers = {"x-reef-scenario": scenario}
        if token:
            headers["authorization"] = f"Bearer {token}"
        self.scenario = scenario
        self._client = httpx.AsyncClient(
            base_url=url, headers=headers, timeout=timeout_s, limits=httpx.Limits(max_connections=64)
        )

    async def aclose(self) -> None:
        await self._client.aclose()

    async def chat(
        self,
        task: DemoTask,
        temperature: float,
        max_tokens: int,
        tags: dict[str, str] | None = None,
        release_id: str | None = None,
        prefix: Sequence[dict[str, str]] = (),
    ) -> Answer:
        """One task answered; `prefix` (a control's instruction and examples) goes before its question, in place of
        the task's own context."""
        messages = [*prefix, task.question()] if prefix else task.messages()
        text, receipt, served_by = await self.complete(messages, temperature, max_tokens, tags, release_id)
        return Answer(task=task, text=text, receipt=receipt, release_id=served_by)

    async def complete(
        self,
        messages: list[dict[str, Any]],
        temperature: float,
        max_tokens: int,
        tags: dict[str, str] | None = None,
        release_id: str | None = None,
    ) -> tuple[str, str, str | None]:
        """(answer text, receipt, serving release) of one chat completion; `tags` go as `x-reef-tag-<name>`,
        `release_id` pins the release that answers (`x-reef-release-id`; None: the serving one)."""
        body = {"messages": messages, "temperature": temperature, "max_tokens": max_tokens}
        headers = {f"x-reef-tag-{name}": value for name, value in (tags or {}).items()}
        if release_id is not None:
            headers["x-reef-release-id"] = release_id
        response = await self._client.post("/v1/chat/completions", json=body, headers=headers)
        _raise_for_status(response)
        choices = response.json().get("choices") or [{}]
        text = (choices[0].get("message") or {}).get("content") or ""
        return text, response.headers.get("x-reef-agent-record-id", ""), response.headers.get("x-reef-release-id")

    async def records(self, after_sequence: int = 0, limit: int = 1000) -> tuple[list[dict[str, Any]], int | None]:
        """One page of this scenario's record rows, and the sequence to read after (None at the end)."""
        response = await self._client.get(
            f"/reef/scenarios/{self.scenario}/records", params={"after_sequence": after_sequence, "limit": limit}
        )
        _raise_for_status(response)
        body = response.json()
        return list(body.get("records") or []), body.get("next_after_sequence")

    async def answer_all(
        self,
        tasks: Sequence[DemoTask],
        temperature: float,
        max_tokens: int,
        tags: dict[str, str] | None = None,
        prefix: Sequence[dict[str, str]] = (),
        release_id: str | None = None,
    ) -> list[Answer]:
        """All at once, so the engine can batch them."""
        return list(
            await asyncio.gather(*(self.chat(t, temperature, max_tokens, tags, release_id, prefix) for t in tasks))
        )

    async def report(self, score: float | None, receipt: str, metadata: dict[str, Any] | None = None) -> str:
        """Report on `receipt`: its `score` (None: no score, which no rollout counts) and `metadata`."""
        body: dict[str, Any] = {"references": [receipt]}
        if score is not None:
            body["score"] = score
        if metadata:
            body["metadata"] = metadata
        response = await self._client.post("/reef/report", json=body)
        _raise_for_status(response)
        return str(response.json().get("agent_record_id", ""))

    async def measure(
        self,
        tasks: Sequence[DemoTask],
        max_tokens: int,
        prefix: Sequence[dict[str, str]] = (),
        release_id: str | None = None,
    ) -> Measurement:
        """The held-out score of whatever release serves now (or of `release_id`): greedy answers graded exactly and
        with partial credit; with `prefix` (a control), each question after that conversation."""
        started = time.monotonic()
        purpose = "control" if prefix else "heldout"
        answers = await self.answer_all(tasks, 0.0, max_tokens, {"purpose": purpose}, prefix, release_id)
        families: dict[str, list[float]] = {}
        for answer in answers:
            families.setdefault(answer.task.family, []).append(float(is_exact(answer.task, answer.text)))
        exact = [float(is_exact(a.task, a.text)) for a in answers]
        partial = [partial_credit(a.task, a.text) for a in answers]
        releases = {a.release_id for a in answers}
        return Measurement(
            exact=round(_mean(exact), 4),
            partial=round(_mean(partial), 4),
            by_family={name: round(_mean(scores), 4) for name, scores in sorted(families.items())},
            release_id=releases.pop() if len(releases) == 1 else None,
            wall_s=round(time.monotonic() - started, 2),
            exact_ci95=wilson_interval(sum(exact), len(exact)),
            partial_ci95=mean_interval(partial),
        )

    async def create(self) -> None:
        """Create this scenario (nothing happens if it exists)."""
        _raise_for_status(await self._client.post("/reef/scenarios", json={"name": self.scenario}))

    async def add_tasks(self, rows: Sequence[dict[str, Any]]) -> None:
        """Add `rows` to this scenario's gate tasks (`POST /reef/scenarios/{s}/tasks`), beside the earlier ones."""
        _raise_for_status(await self._client.post(f"/reef/scenarios/{self.scenario}/tasks", json={"tasks": rows}))

    async def update(self, body: dict[str, Any]) -> dict[str, Any]:
        """`POST /reef/scenarios/{s}/update`: the training mode, pause, or rollout mode."""
        response = await self._client.post(f"/reef/scenarios/{self.scenario}/update", json=body)
        _raise_for_status(response)
        return dict(response.json())

    async def rollout(self) -> dict[str, Any]:
        """The scenario's open or last rollout (`GET /reef/scenarios/{s}/rollout`)."""
        response = await self._client.get(f"/reef/scenarios/{self.scenario}/rollout")
        _raise_for_status(response)
        return dict(response.json())

    async def status(self) -> dict[str, Any]:
        """This scenario's entry in `GET /reef/status` ({} before the scenario exists)."""
        response = await self._client.get("/reef/status")
        _raise_for_status(response)
        return dict((response.json().get("scenarios") or {}).get(self.scenario) or {})

    async def lineage_tip(self) -> str | None:
        """The learner's working lineage tip (the weights its next step trains from), None when it has none."""
        return ((await self.status()).get("lineage") or {}).get("tip_release_id")

    async def commits(self, after_step: int = -1) -> list[dict[str, Any]]:
        response = await self._client.get(
            f"/reef/scenarios/{self.scenario}/commits", params={"after_step": after_step, "limit": 1000}
        )
        if response.status_code == 404:  # the scenario does not exist yet
            return []
        _raise_for_status(response)
        return list(response.json().get("commits") or [])

    async def last_step(self) -> int:
        commits = await self.commits()
        return max((int(c.get("step", 0)) for c in commits), default=0)

    async def wait_for_step(
        self, after_step: int, timeout_s: float, poll_s: float = 1.0, nudge: Any = None
    ) -> StepOutcome:
        """Poll the commit log until a step after `after_step` is committed and, if published, serves.

        `nudge()` (async, optional) is awaited while the learner sits idle with no step, e.g. to send more
        rollouts when a grouped recipe dropped groups that carried no signal; once it returns False (nothing more
        to send) and the learner stays idle, the wait ends `starved` instead of running out the timeout.
        """
        started = time.monotonic()
        idle_polls = 0
        exhausted = False
        while time.monotonic() - started < timeout_s:
            commits = await self.commits(after_step)
            if commits:
                commit = commits[0]
                if commit.get("verdict") == "published":
                    await self._wait_until_serving(commit.get("release_id"), timeout_s - (time.monotonic() - started))
                return StepOutcome(commit, round(time.monotonic() - started, 2))
            state = await self.status()
            job = (state.get("job") or {}).get("state", "idle")
            # The learner starts a step within a poll of a full batch, so a long idle spell means a short batch.
            idle_polls = idle_polls + 1 if job == "idle" else 0
            if nudge is not None and idle_polls >= 5:
                if exhausted:
                    return StepOutcome(None, round(time.monotonic() - started, 2), starved=True)
                idle_polls = 0
                exhausted = await nudge() is False
            await asyncio.sleep(poll_s)
        return StepOutcome(None, round(time.monotonic() - started, 2))

    async def _wait_until_serving(self, release_id: str | None, timeout_s: float) -> None:
        deadline = time.monotonic() + max(timeout_s, 5.0)
        while release_id and time.monotonic() < deadline:
            if (await self.status()).get("current_release_id") == release_id:
                return
            await asyncio.sleep(0.5)


def wilson_interval(successes: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval of a proportion (sound near 0 and 1, unlike the normal approximation)."""
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (round(max(0.0, centre - half), 4), round(min(1.0, centre + half), 4))


def mean_interval(values: Sequence[float], z: float = 1.96) -> tuple[float, float]:
    """Normal-approximation interval of the mean of scores in [0, 1], clipped to [0, 1]."""
    n = len(values)
    if n < 2:
        return (0.0, 1.0)
    mean = sum(values) / n
    half = z * statistics.stdev(values) / math.sqrt(n)
    return (round(max(0.0, mean - half), 4), round(min(1.0, mean + half), 4))


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _raise_for_status(response: httpx.Response) -> None:
    if response.status_code >= 400:
        raise RuntimeError(
            f"{response.request.method} {response.request.url.path}: {response.status_code} {response.text}"
        )
