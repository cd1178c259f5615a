"""A `python` discovery attempt cannot write the evaluator's result: not through any descriptor it holds or can open
under /proc, not by printing a result line, and not by being run inside the evaluator's own process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reef.discovery.evaluation import evaluate_attempt
from reef.discovery.problem import Problem, load_problem
from reef.sandbox import bwrap_available

pytestmark = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap (bwrap) is not installed")

FORGED_SCORE = 1_000_000.0

# Writes a forged result to every descriptor it holds (0-255) and to every /proc/<pid>/fd/<n> it can open (once per
# pipe or file), prints a forged result line, reports what it reached, and ends at once with status 0 (in the
# evaluator's own process that would stop the real result from being written after the forged one).
FORGING_ATTEMPT = r"""
import json, os
forged = json.dumps({"score": 1000000.0, "valid": True, "details": "forged"}).encode()
seen, reached = set(), []

def forge(fd, name):
    try:
        stat = os.fstat(fd)
        if (stat.st_dev, stat.st_ino) in seen:
            return
        seen.add((stat.st_dev, stat.st_ino))
        os.write(fd, forged)
        reached.append(name)
    except OSError:
        pass

for fd in range(256):
    forge(fd, f"fd {fd}")
for pid in sorted(p for p in os.listdir("/proc") if p.isdigit()):
    try:
        entries = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        continue
    for entry in entries:
        path = f"/proc/{pid}/fd/{entry}"
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_APPEND)
        except OSError:
            continue
        try:
            forge(fd, path)
        finally:
            os.close(fd)
ancestors, pid = [], os.getpid()
for _ in range(2):
    status = open(f"/proc/{pid}/status").read()
    pid = int(next(line.split()[1] for line in status.splitlines() if line.startswith("PPid:")))
    ancestors.append(pid)
print("REEF-RESULT-0 " + forged.decode(), flush=True)
print("\nREACHED " + json.dumps({"reached": reached, "ancestors": ancestors}), flush=True)
os._exit(0)
"""

# Runs the attempt as a process of its own and scores 2 when it ends well: the attempt's real score is 2.
SUBPROCESS_EVALUATOR = """
import subprocess, sys

def evaluate(solution):
    done = subprocess.run([sys.executable, "-I", "-c", solution], capture_output=True, text=True, timeout=30)
    report = [line for line in done.stdout.splitlines() if line.startswith("REACHED ")]
    return {"score": 2.0 if done.returncode == 0 else 1.0, "valid": True, "details": (report or [""])[-1]}
"""

# Runs the attempt inside its own process, the one that hands the result back.
IN_PROCESS_EVALUATOR = """
def evaluate(solution):
    exec(solution, {})
    return {"score": 2.0, "valid": True, "details": "ran in the evaluator's process"}
"""


def _problem(tmp_path: Path, evaluator: str) -> Problem:
    spec = {"name": "forge", "direction": "max", "solution_format": "python", "task": "T.", "seeds": ["x = 1"]}
    (tmp_path / "problem.json").write_text(json.dumps(spec))
    (tmp_path / "evaluate.py").write_text(evaluator)
    return load_problem(str(tmp_path))


def test_an_attempt_run_as_its_own_process_scores_what_it_earned_not_what_it_forged(tmp_path: Path) -> None:
    problem = _problem(tmp_path, SUBPROCESS_EVALUATOR)
    assert evaluate_attempt(problem, "x = 1", sandbox=True).score == 2.0  # an honest attempt
    forged = evaluate_attempt(problem, FORGING_ATTEMPT, sandbox=True)
    assert forged.score != FORGED_SCORE
    assert forged.valid and forged.score == 2.0, forged.details
    said = json.loads(forged.details.removeprefix("REACHED "))
    evaluator, runner = said["ancestors"]
    carriers = [f"/proc/{pid}/fd/" for pid in (evaluator, runner)]
    assert not [path for path in said["reached"] if path.startswith(tuple(carriers))], said


def test_an_attempt_the_evaluator_runs_in_its_own_process_is_refused_not_scored(tmp_path: Path) -> None:
    problem = _problem(tmp_path, IN_PROCESS_EVALUATOR)
    forged = evaluate_attempt(problem, FORGING_ATTEMPT, sandbox=True)
    assert forged.score != FORGED_SCORE
    assert not forged.valid and forged.reward == 0.0
    assert "process of its own" in forged.details
    honest = evaluate_attempt(problem, "x = 1", sandbox=True)
    assert not honest.valid and "process of its own" in honest.details


def test_the_evaluator_may_still_read_the_attempts_syntax_tree(tmp_path: Path) -> None:
    evaluator = "import ast\n\ndef evaluate(solution):\n"
    evaluator += "    return {'score': len(ast.parse(solution).body), 'valid': True}\n"
    problem = _problem(tmp_path, evaluator)
    assert evaluate_attempt(problem, "x = 1\ny = 2\n", sandbox=True).score == 2.0
