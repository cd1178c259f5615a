"""One discovery search driven through Reef's public API, as any client could drive it.

A step: `GET /reef/scenarios/{s}/archive/next?groups=G` → each parent's prompt asked R times through
`/v1/chat/completions` (all at once, so the engine batches them; with the plan's `response_format`, so an engine
that honours it writes only answers of the solution's shape) → each answer's solution extracted and evaluated
in the sandbox, here in the client → one report per attempt → wait until the archive holds the step (the learner
folded the grid in, trained if it trains, and published).

A `random` policy (the control `reef discover --control` runs beside the frozen model) answers every attempt with an
edit drawn uniformly from the same menu the model chooses from (`Problem.useful_edits`); it still asks the served
model for one token per attempt, so that each report cites a real record, as the other arms' reports do.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import random
import time
from collections.abc import Callable
from typing import Any, Literal

import httpx

from reef.discovery.evaluation import Evaluation, evaluate_attempt
from reef.discovery.guidance import parse_guidance
from reef.discovery.problem import Problem
from reef.sandbox import Limits

STEP_TIMEOUT_S = 900.0
CONTROL_FOLD_S = 3.0  # measured: a control step's wait for its archive, 1-3 s on 2 cores
CONTROL_MARGIN = 1.25
Policy = Literal["trained", "frozen", "random"]


def no_reserve(run: SearchRun) -> float:
    """Nothing comes after this search: it may use the time up to its deadline."""
    return 0.0


@dataclasses.dataclass
class SearchRun:
    """What one search measured; `curve` is the best score after each step (index 0: the seed)."""

    recipe: str
    trains: bool
    policy: Policy = "trained"
    seed_best: float | None = None
    curve: list[float | None] = dataclasses.field(default_factory=list)
    steps: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    best_solution: str | None = None
    wall_s: float = 0.0
    startup_s: float = 0.0  # from starting its server to the server answering

    def control_estimate(self) -> float:
        """Seconds a search with training off would need for this run's steps and one more: the same server
        start, and per step the same asking, evaluating and reporting (`ask_s`) plus folding the grid in without
        training (CONTROL_FOLD_S), with a margin (CONTROL_MARGIN). The trained run keeps this in reserve."""
        asked = [s["ask_s"] for s in self.steps]
        one_more = asked[-1] if asked else 0.0
        folds = CONTROL_FOLD_S * (len(asked) + 1)
        return CONTROL_MARGIN * (self.startup_s + sum(asked) + one_more + folds)

    @property
    def best(self) -> float | None:
        return self.curve[-1] if self.curve else self.seed_best

    def valid_fraction(self) -> float | None:
        """Attempts the checker accepted, of all attempts."""
        return self._fraction("valid")

    def parsed_fraction(self) -> float | None:
        """Attempts whose answer held a solution of the problem's format (valid or not), of all attempts."""
        return self._fraction("parsed")

    def copy_fraction(self) -> float | None:
        """Attempts that returned their parent unchanged, of all attempts."""
        return self._fraction("copies")

    def _fraction(self, key: str) -> float | None:
        attempts = sum(s["attempts"] for s in self.steps)
        return round(sum(s[key] for s in self.steps) / attempts, 4) if attempts else None


class SearchClient:
    """The archive routes, chat and report calls of one scenario."""

    def __init__(self, url: str, scenario: str) -> None:
        self.scenario = scenario
        self._http = httpx.AsyncClient(
            base_url=url, headers={"x-reef-scenario": scenario}, timeout=600, limits=httpx.Limits(max_connections=64)
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def get(self, path: str, **params: Any) -> dict[str, Any]:
        response = await self._http.get(path, params=params)
        response.raise_for_status()
        return dict(response.json())

    async def create(self) -> None:
        (await self._http.post("/reef/scenarios", json={"name": self.scenario})).raise_for_status()

    async def archive(self, limit: int = 1) -> dict[str, Any]:
        return await self.get(f"/reef/scenarios/{self.scenario}/archive", limit=limit)

    async def ask(
        self,
        messages: list[dict[str, Any]],
        temperature: float,
        max_tokens: int,
        release_id: str | None = None,
        response_format: dict[str, Any] | None = None,
    ) -> tuple[str, str]:
        """(answer text, receipt); `release_id` pins the release that serves it (the executor: the base release)."""
        body: dict[str, Any] = {"messages": messages, "temperature": temperature, "max_tokens": max_tokens}
        if response_format is not None:
            body["response_format"] = response_format
        headers = {"x-reef-release-id": release_id} if release_id else {}
        response = await self._http.post("/v1/chat/completions", json=body, headers=headers)
        response.raise_for_status()
        text = ((response.json().get("choices") or [{}])[0].get("message") or {}).get("content") or ""
        return text, response.headers.get("x-reef-agent-record-id", "")

    async def base_release(self) -> str:
        """The scenario's first release: the base model, no adapter (Guidance-TTT's frozen executor)."""
        releases = (await self.get(f"/reef/scenarios/{self.scenario}/releases"))["releases"]
        return str(releases[-1]["release_id"])

    async def report(self, score: float, receipt: str, metadata: dict[str, Any]) -> None:
        body = {"score": score, "references": [receipt], "metadata": metadata}
        (await self._http.post("/reef/report", json=body)).raise_for_status()


async def run_search(
    client: SearchClient,
    problem: Problem,
    run: SearchRun,
    *,
    groups: int,
    steps: int,
    deadline: float,
    temperature: float,
    max_tokens: int,
    limits: Limits,
    on_step: Callable[[dict[str, Any]], None],
    reserve: Callable[[SearchRun], float] = no_reserve,
    seed: int = 0,
) -> None:
    """Run up to `steps` steps, none starting that would end past `deadline` (monotonic) less `reserve(run)` (the
    time something after this search needs, e.g. the control's), filling `run`."""
    await client.create()
    first = (await client.archive())["entries"][0]
    run.seed_best, run.best_solution = first["score"], first["solution"]
    run.curve.append(first["score"])
    rng = random.Random(f"random-policy:{seed}")
    for _ in range(steps):
        # No step starts that would end past the deadline, judging by the last one's length.
        if time.monotonic() + (run.steps[-1]["wall_s"] if run.steps else 0.0) + reserve(run) >= deadline:
            break
        started = time.monotonic()
        plan = await client.get(f"/reef/scenarios/{client.scenario}/archive/next", groups=groups)
        asked = [(p, rollout) for p in plan["parents"] for rollout in range(plan["rollouts"])]
        guided = plan.get("mode") == "guidance" and run.policy != "random"  # a random edit needs no executor
        # The solution's shape binds whoever writes the attempt: the model itself, or in guidance mode the executor.
        guide_shape = plan.get("guide_response_format")
        if run.policy == "random":
            answers = await asyncio.gather(*(_random_edit(client, problem, p, temperature, rng) for p, _ in asked))
        else:
            answers = await asyncio.gather(
                *(
                    client.ask(
                        p["messages"],
                        temperature,
                        max_tokens,
                        response_format=guide_shape if guided else p["response_format"],
                    )
                    for p, _ in asked
                )
            )
        # The attempt's text: the model's answer, or in guidance mode the executor's (None: malformed guidance).
        texts: list[str | None] = [text for text, _ in answers]
        if guided:
            executor = await client.base_release()
            texts = await asyncio.gather(
                *(
                    _execute(client, p, text, executor, temperature, max_tokens, p["response_format"])
                    for (p, _), (text, _) in zip(asked, answers, strict=True)
                )
            )
        solutions = [
            None if text is None else problem.extract(text, p["solution"])
            for (p, _), text in zip(asked, texts, strict=True)
        ]
        evaluations = await asyncio.gather(
            *(asyncio.to_thread(evaluate_attempt, problem, s, limits) for s in solutions)
        )
        for (parent, rollout), (_, receipt), solution, evaluation in zip(
            asked, answers, solutions, evaluations, strict=True
        ):
            await client.report(
                evaluation.score or 0.0, receipt, _metadata(plan["step"], parent, rollout, solution, evaluation)
            )
        asked_s = time.monotonic() - started
        archive = await _await_step(client, plan["step"])
        best = archive["entries"][0]
        run.curve.append(best["score"])
        run.best_solution = best["solution"]
        copies = sum(s == p.get("solution") for s, (p, _) in zip(solutions, asked, strict=True))
        entry = _step_summary(plan["step"], evaluations, best["score"], time.monotonic() - started)
        entry.update(parsed=sum(s is not None for s in solutions), copies=copies, ask_s=round(asked_s, 1))
        run.steps.append(entry)
        on_step(entry)


async def _random_edit(
    client: SearchClient, problem: Problem, parent: dict[str, Any], temperature: float, rng: random.Random
) -> tuple[str, str]:
    """(an edit drawn uniformly from the parent's menu, as JSON; the receipt of a one-token answer to cite)."""
    _, receipt = await client.ask(parent["messages"], temperature, 1)
    menu = problem.useful_edits(parent["solution"]) or []
    return (json.dumps(rng.choice(menu)) if menu else ""), receipt


async def _execute(
    client: SearchClient,
    parent: dict[str, Any],
    guide_answer: str,
    executor: str,
    temperature: float,
    max_tokens: int,
    response_format: dict[str, Any] | None,
) -> str | None:
    """The frozen executor's answer to the parent plus the guide's advice; None (skipped) for malformed guidance."""
    advice = parse_guidance(guide_answer)
    if advice is None:
        return None
    prompt = parent["executor_template"].replace("{guidance}", advice)
    text, _ = await client.ask(
        [{"role": "user", "content": prompt}], temperature, max_tokens, executor, response_format
    )
    return text


def _metadata(
    step: int, parent: dict[str, Any], rollout: int, solution: str | None, evaluation: Evaluation
) -> dict[str, Any]:
    return {
        "step": step,
        "group": parent["group"],
        "rollout": rollout,
        "parent_id": parent["parent_id"],
        "solution": solution,
        "valid": evaluation.valid,
        "details": evaluation.details[-400:],
    }


async def _await_step(client: SearchClient, step: int) -> dict[str, Any]:
    """The archive once it holds `step` (the learner published the release that folded it in)."""
    waited = time.monotonic()
    while time.monotonic() - waited < STEP_TIMEOUT_S:
        archive = await client.archive()
        if archive["step"] >= step:
            return archive
        await asyncio.sleep(1.0)
    raise TimeoutError(f"the learner did not publish step {step} within {STEP_TIMEOUT_S:.0f} s")


def _step_summary(step: int, evaluations: list[Evaluation], best: float | None, wall_s: float) -> dict[str, Any]:
    valid = [e.score for e in evaluations if e.valid and e.score is not None]
    return {
        "step": step,
        "best": best,
        "step_best": max(valid) if valid else None,
        "step_mean": round(sum(valid) / len(valid), 6) if valid else None,
        "attempts": len(evaluations),
        "valid": len(valid),
        "wall_s": round(wall_s, 1),
    }
