"""Scoring one attempt: the problem's evaluator runs in a fresh sandboxed process, never in the caller's.

A timed-out, crashing or invalid attempt scores 0 (invalid) with the reason in `details`; only a sandbox that cannot
start at all (bubblewrap or the interpreter missing) raises `EvaluatorFailure`, so a broken evaluator stops a step
instead of turning every attempt into a zero.

The evaluator (and with it a `python` attempt's code, which it runs) runs in a process apart from the runner that
writes the result line: the runner reads the request (solution, options, a one-time marker) and deletes it before
starting that process, so an attempt that prints a result line, marker or not, only adds to the output. What the
attempt can still do is what the evaluator lets it: a `python` problem's evaluator that `exec`s the solution in its
own process shares that process with it, so it should check what it gets back, not trust it.
"""

from __future__ import annotations

import dataclasses
import json
import math
import secrets
import sys
from typing import Any

from reef.discovery.problem import Problem, parses
from reef.sandbox import Limits, SandboxRefused, run_sandboxed

# The runner reads the request (with the one-time marker), deletes it and starts the evaluator in a process of its
# own (`ATTEMPT`), which gets the solution on stdin and hands its result back on a pipe; only the runner, which the
# attempt's code never runs in, writes the marker line. The attempt's own output goes to stderr.
RUNNER = r"""
import json, os, signal, subprocess, sys
request = json.load(open("request.json"))
os.remove("request.json")
marker = request.pop("marker")
read_end, write_end = os.pipe()
child = subprocess.Popen(
    [sys.executable, "-I", "attempt.py", str(write_end)],
    stdin=subprocess.PIPE, stdout=sys.stderr.fileno(), pass_fds=(write_end,),
)
os.close(write_end)
child.stdin.write(json.dumps(request).encode())
child.stdin.close()
with os.fdopen(read_end, "rb") as pipe:
    result = pipe.read()
code = child.wait()
if code < 0:
    os.kill(os.getpid(), -code)
if code != 0:
    sys.exit(code)
sys.stdout.write("\n" + marker + json.dumps(json.loads(result)) + "\n")
"""

ATTEMPT = r"""
import importlib.util, json, os, sys
result_fd = int(sys.argv[1])
request = json.loads(sys.stdin.read())
spec = importlib.util.spec_from_file_location("evaluator", "evaluator.py")
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
solution = json.loads(request["solution"]) if request["format"] == "json" else request["solution"]
result = module.evaluate(solution, **request["options"])
os.write(result_fd, json.dumps(result).encode())
"""


class EvaluatorFailure(RuntimeError):
    """The evaluator could not be run at all (not: the attempt failed)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Evaluation:
    """An attempt's score (None when invalid), validity, the evaluator's words and how it ended."""

    score: float | None
    valid: bool
    details: str
    reward: float  # higher is better; 0 when invalid (see Problem.reward)

    def to_json(self) -> dict[str, Any]:
        return {"score": self.score, "valid": self.valid, "details": self.details, "reward": self.reward}


def evaluate_attempt(
    problem: Problem, solution: str | None, limits: Limits = Limits(), *, sandbox: bool | None = None
) -> Evaluation:
    """Score `solution` (the text `Problem.extract` found, or None when the answer held no solution)."""
    if solution is None and problem.answer == "edit":
        return _invalid(problem, "no edit that changes the parent (none found, not applicable, or a no-op)")
    if solution is None or not parses(solution, problem.solution_format):
        return _invalid(problem, f"not a valid {problem.solution_format} solution")
    marker = f"REEF-RESULT-{secrets.token_hex(16)} "
    request = {"solution": solution, "format": problem.solution_format, "options": problem.options, "marker": marker}
    files = {"runner.py": RUNNER, "attempt.py": ATTEMPT, "evaluator.py": problem.evaluator_source}
    files["request.json"] = json.dumps(request)
    try:
        result = run_sandboxed([sys.executable, "-I", "runner.py"], files, limits, sandbox=sandbox)
    except SandboxRefused as error:
        raise EvaluatorFailure(str(error)) from error
    except OSError as error:
        raise EvaluatorFailure(f"the sandbox could not start: {error}") from error
    if result.timed_out:
        return _invalid(problem, f"timed out after {limits.wall_s:g} s")
    if result.killed:
        return _invalid(problem, f"killed (exit {result.exit_code}): past its CPU or memory limit")
    lines = [line for line in result.stdout.splitlines() if line.startswith(marker)]
    if result.exit_code != 0 or not lines:
        return _invalid(problem, f"the evaluator failed (exit {result.exit_code}): {result.stderr.strip()[-300:]}")
    return _parsed(problem, lines[-1][len(marker) :])


def _parsed(problem: Problem, text: str) -> Evaluation:
    try:
        outcome = json.loads(text)
        score, valid = outcome.get("score"), bool(outcome.get("valid"))
        details = str(outcome.get("details", ""))
    except (ValueError, AttributeError):
        return _invalid(problem, "the evaluator returned no {score, valid, details} object")
    if not isinstance(score, int | float) or isinstance(score, bool) or not math.isfinite(score):
        return _invalid(problem, f"the evaluator returned a non-finite score: {details}")
    if not valid:
        return _invalid(problem, details)
    return Evaluation(float(score), True, details, problem.reward(float(score), True))


def _invalid(problem: Problem, details: str) -> Evaluation:
    return Evaluation(None, False, details, problem.reward(None, False))
