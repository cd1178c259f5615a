"""Scoring one attempt: the problem's evaluator runs in a fresh sandboxed process, never in the caller's.

A timed-out, crashing or invalid attempt scores 0 (invalid) with the reason in `details`; only a sandbox that cannot
start at all (bubblewrap or the interpreter missing) raises `EvaluatorFailure`, so a broken evaluator stops a step
instead of turning every attempt into a zero.

Three processes take part, and the attempt's code runs in none of the two that carry the result:
- the runner reads the request (solution, options, a one-time marker) and deletes it, starts the evaluator's process
  and, once that has ended, writes the only result line (marker first) on the sandbox's stdout;
- the evaluator's process loads the problem's `evaluate` and hands its result to the runner on a pipe;
- a `python` attempt runs as a process of its own that the evaluator starts (`subprocess.run([sys.executable, "-c",
  solution], ...)`). Compiling the attempt's text inside the evaluator's process (`exec`, `compile`, an import of it)
  is refused: there it could write any result it liked. `ast.parse` of it is fine.

The attempt's process holds neither the pipe nor the marker, and cannot get at them: the pipe is closed in every
process the evaluator starts (not inherited on exec, closed after a fork), and the runner and the evaluator make
themselves non-dumpable, so another process of the same user can neither open their `/proc/<pid>/fd` entries nor
read their memory (the sandbox gives no capability that would override that). Before writing its line the runner
kills every other process left in the sandbox, so none is still there to read the line or write after it. What the
attempt prints is the evaluator's data, never a result.
"""

from __future__ import annotations

import dataclasses
import json
import math
import secrets
import sys
from typing import Any

from reef.discovery.problem import Problem, parses
from reef.sandbox import Limits, SandboxRefused, choose_sandbox, run_sandboxed

# Shared by the runner and the evaluator's process: make this process non-dumpable (no /proc/<pid>/fd, mem or ptrace
# for other processes of the same user). It must succeed under bubblewrap; unsandboxed it is only best effort.
PRIVATE = r"""
import ctypes
def private():
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0) == 0  # PR_SET_DUMPABLE, SUID_DUMP_DISABLE
    except (AttributeError, OSError):
        return False
"""

RUNNER = (
    PRIVATE
    + r"""
import json, os, signal, subprocess, sys, time
request = json.load(open("request.json"))
os.remove("request.json")
marker = request.pop("marker")
sandboxed = request["sandboxed"]

def report(line):
    sys.stdout.write("\n" + marker + line + "\n")
    sys.stdout.flush()

def clear():
    # Kill whatever the attempt left behind (everything in this PID namespace but bubblewrap's init and the runner).
    try:
        os.kill(-1, signal.SIGKILL)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + 2.0
    while others() and time.monotonic() < deadline:
        time.sleep(0.01)

def others():
    return [p for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, os.getpid())]

def in_own_pid_namespace():
    # bubblewrap's reaper is this namespace's pid 1 and the runner's parent: only there does -1 mean this sandbox.
    try:
        return os.getppid() == 1 and open("/proc/1/comm").read().strip() == "bwrap"
    except OSError:
        return False

if not private() and sandboxed:
    report("!the evaluator's processes cannot be made private (prctl PR_SET_DUMPABLE failed)")
    sys.exit(0)
read_end, write_end = os.pipe()
child = subprocess.Popen(
    [sys.executable, "-I", "host.py", str(write_end)],
    stdin=subprocess.PIPE, stdout=sys.stderr.fileno(), pass_fds=(write_end,),
)
os.close(write_end)
child.stdin.write(json.dumps(request).encode())
child.stdin.close()
with os.fdopen(read_end, "rb") as pipe:
    result = pipe.read()
code = child.wait()
if sandboxed and in_own_pid_namespace():
    clear()
if code < 0:
    os.kill(os.getpid(), -code)
if code != 0:
    sys.exit(code)
report(json.dumps(json.loads(result)))
"""
)

HOST = (
    PRIVATE
    + r"""
import ast, importlib.util, json, os, sys
result_fd = int(sys.argv[1])
os.set_inheritable(result_fd, False)
os.register_at_fork(after_in_child=lambda: os.close(result_fd))
request = json.loads(sys.stdin.read())
if not private() and request["sandboxed"]:
    sys.exit("the evaluator's process cannot be made private (prctl PR_SET_DUMPABLE failed)")
spec = importlib.util.spec_from_file_location("evaluator", "evaluator.py")
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
solution = json.loads(request["solution"]) if request["format"] == "json" else request["solution"]
text = solution.strip() if isinstance(solution, str) else ""

def holds_the_attempt(source):
    if isinstance(source, ast.AST):
        return True
    if isinstance(source, str):
        return text in source
    try:
        return text.encode() in bytes(source)
    except TypeError:
        return False

def refuse_the_attempts_code(event, args):
    if event == "compile" and text and holds_the_attempt(args[0]):
        if sys._getframe(1).f_code is not ast.parse.__code__:
            raise PermissionError(
                "the evaluator tried to run the attempt inside its own process, where it could write the result; "
                "run it as a process of its own, e.g. subprocess.run([sys.executable, '-c', solution])"
            )

if request["format"] == "python":
    sys.addaudithook(refuse_the_attempts_code)
result = module.evaluate(solution, **request["options"])
os.write(result_fd, json.dumps(result).encode())
"""
)


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
    try:
        sandboxed = choose_sandbox(False, "a discovery attempt") if sandbox is None else sandbox
    except SandboxRefused as error:
        raise EvaluatorFailure(str(error)) from error
    request: dict[str, Any] = {"solution": solution, "format": problem.solution_format, "marker": marker}
    request |= {"options": problem.options, "sandboxed": sandboxed}
    files = {"runner.py": RUNNER, "host.py": HOST, "evaluator.py": problem.evaluator_source}
    files["request.json"] = json.dumps(request)
    try:
        result = run_sandboxed([sys.executable, "-I", "runner.py"], files, limits, sandbox=sandboxed)
    except SandboxRefused as error:
        raise EvaluatorFailure(str(error)) from error
    except OSError as error:
        raise EvaluatorFailure(f"the sandbox could not start: {error}") from error
    if result.timed_out:
        return _invalid(problem, f"timed out after {limits.wall_s:g} s")
    if result.killed:
        return _invalid(problem, f"killed (exit {result.exit_code}): past its CPU or memory limit")
    lines = [line[len(marker) :] for line in result.stdout.splitlines() if line.startswith(marker)]
    if lines and lines[-1].startswith("!"):
        raise EvaluatorFailure(lines[-1][1:])
    if result.exit_code != 0 or not lines:
        return _invalid(problem, f"the evaluator failed (exit {result.exit_code}): {result.stderr.strip()[-300:]}")
    return _parsed(problem, lines[-1])


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
