"""The control arms of `reef demo`, measured in the same invocation on the same held-out tasks as the result.

- `prompt` (weights recipes): the base model prompted as well as we can without training — the suite's
  instruction as the system prompt and k solved training examples as earlier turns, k as large as the context
  allows (`context_turns`) or the suite's cap (`Suite.control_examples`). What a harness step could do without
  touching the weights.
- `memory` (`--feedback score`): the strongest competitor that changes no weights, given the same scores: the
  base model with the deployment's answer form and, as worked examples, every training question whose sampled
  answer users scored 1 (`memory_control_messages`).
- `fallback` (harness methods): the same method with its proposer off (`recipe_config.proposer: off`), so every
  step is its deterministic fallback; `proposer_share` says how many published steps the proposer made.

Each control is `{"score", "interval"}` in the demo's own metric (95 % interval over the held-out tasks).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reef.demo.api import Answer, Measurement
from reef.demo.suites import Suite
from reef.demo.tasks import DemoTask

CONTEXT_TOKENS = 8_192  # SmolLM2's context
ANSWER_RESERVE_TOKENS = 512  # the held-out question, the chat template's own tokens, and the answer
CHARS_PER_TOKEN = 3  # a cautious estimate for English and codes with SmolLM2's tokenizer
TURN_OVERHEAD_TOKENS = 10  # the chat template's role markers around each turn
EXAMPLE_POOL = 300  # training tasks to draw the examples from (the suite's training split)


def context_turns(system: str, examples: list[DemoTask], context_tokens: int = CONTEXT_TOKENS) -> list[tuple[str, str]]:
    """As many solved examples as fit in `context_tokens` after the system prompt and the reserve, in order."""
    budget = context_tokens - ANSWER_RESERVE_TOKENS - len(system) // CHARS_PER_TOKEN - TURN_OVERHEAD_TOKENS
    turns: list[tuple[str, str]] = []
    for task in examples:
        cost = (len(task.prompt) + len(task.answer)) // CHARS_PER_TOKEN + 2 * TURN_OVERHEAD_TOKENS
        if cost > budget:
            break
        budget -= cost
        turns.append((task.prompt, task.answer))
    return turns


def prompt_control_messages(suite: Suite, seed: int, context_tokens: int = CONTEXT_TOKENS) -> list[dict[str, str]]:
    """The conversation every held-out question is appended to: instruction, then solved training examples."""
    system = suite.instruction(seed)
    examples = list({t.prompt: t for t in suite.generate("train", EXAMPLE_POOL, seed)}.values())
    return _conversation(system, examples[: suite.control_examples], context_tokens)


def memory_control_messages(
    context: Sequence[tuple[str, str]], remembered: Sequence[Answer], context_tokens: int = CONTEXT_TOKENS
) -> list[dict[str, str]]:
    """The conversation the memory control appends every held-out question to: the deployment's system prompt
    (`context`'s first message), then each distinct remembered question with its answer, oldest first."""
    system = next((text for role, text in context if role == "system"), "")
    distinct = list({a.task.prompt: DemoTask("", a.task.prompt, a.text) for a in remembered}.values())
    return _conversation(system, distinct, context_tokens)


def _conversation(system: str, examples: list[DemoTask], context_tokens: int) -> list[dict[str, str]]:
    """`system`, then as many of `examples` as the context holds as solved user/assistant turns."""
    messages = [{"role": "system", "content": system}]
    for question, answer in context_turns(system, examples, context_tokens):
        messages += [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
    return messages


def control_json(measurement: Measurement | None, metric: str) -> dict[str, Any] | None:
    """`{"score", "interval", "examples"?}` of a control measured in `metric`."""
    if measurement is None:
        return None
    return {"score": measurement.score(metric), "interval": list(measurement.interval(metric))}


def proposer_share(rounds: list[dict[str, Any]]) -> float | None:
    """Of the published steps, the share whose change came from the proposer (None: nothing was published)."""
    published = [r for r in rounds if r.get("verdict") == "published"]
    if not published:
        return None
    return round(sum(r.get("source") == "proposer" for r in published) / len(published), 4)


def summary_rows(result: dict[str, Any]) -> list[tuple[str, float | None, list[float] | None]]:
    """(arm, score, 95 % interval) of the result and of every control, in the demo's metric."""
    rows: list[tuple[str, float | None, list[float] | None]] = [
        ("base model", result.get("baseline"), _listed(result.get("baseline_ci95"))),
        (f"{result.get('recipe')} (trained)", result.get("final"), _listed(result.get("final_ci95"))),
    ]
    for name, control in (result.get("controls") or {}).items():
        if control is not None:
            rows.append((f"control: {name}", control.get("score"), _listed(control.get("interval"))))
    return rows


def _listed(value: Any) -> list[float] | None:
    return [float(v) for v in value] if isinstance(value, list | tuple) and len(value) == 2 else None
