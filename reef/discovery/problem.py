"""A discovery problem: what to ask, how a solution is written, how it is scored, where the search starts.

A problem is named three ways:
- a built-in name (`circle-packing`, `erdos-min-overlap`),
- `package.module`: a stdlib-only module with `DIRECTION` ("max" | "min"), `SOLUTION_FORMAT` ("json" | "python"),
  `OPTIONS` (defaults), `task(**options) -> str`, `seeds(**options) -> [solution text]`,
  `evaluate(solution, **options) -> {"score", "valid", "details"}` (and optionally `PROMPT` — a template, or a
  function of the options returning one —, `best_known`, `solution_schema(**options)`, and for answers that are
  edits `edit_schema(**options)` with `apply_edit(solution, edit, **options)`),
- a directory holding `problem.json` (`{"name", "direction", "solution_format", "task", "seeds", "options",
  "prompt"?, "best_known"?, "solution_schema"?, "edit_schema"?}`) and `evaluate.py` defining
  `evaluate(solution, **options)` (and `apply_edit(solution, edit, **options)` with an `edit_schema`).

A `json` problem's `solution_schema` (a JSON Schema of the solution's shape) goes out with every prompt as an
OpenAI `response_format`, so an engine that honours it (the embedded one does) only writes answers of that shape.
The schema constrains the form, never the score: whether an answer is valid is the evaluator's call.

**Answers that are edits.** A `json` problem may instead ask for an *edit* of the parent: its `edit_schema` (a
JSON Schema of one edit, e.g. `{"circle": 2, "change": "grow"}`) goes out as the `response_format`, and
`apply_edit(parent, edit, **options)` turns the parent's parsed solution and the parsed edit into the attempt's
solution (raising `ValueError` for an edit it cannot apply: the attempt then holds no solution, as it does when the edit
leaves the parent unchanged — a copy is never an attempt, so it scores 0 and is not archived). A small model
that cannot write a slightly changed list of numbers can still choose an edit; the attempt that is evaluated,
archived and reported is the whole solution. `apply_edit` runs in the caller's process (it is the problem's
code, not the model's); the evaluator still runs in the sandbox.

**Only edits that change the parent are offered.** When the edit schema is an object whose properties are all
`enum`s (a finite set of edits, at most MAX_ENUMERATED_EDITS), `response_format(parent)` lists exactly the edits that
apply to that parent and change it (an `anyOf` of their values). A small model that prefers one kind of edit (SmolLM2
answers circle packing's `grow` about 85 % of the time) would otherwise spend most attempts on edits that change
nothing once that kind is used up, and a policy trained on its early successes would answer nothing else: every
group all zeros, no advantage to learn from. The masking is the sampler's; the recorded log-probs stay the model's.

The evaluator source is copied into a fresh sandbox for every attempt (`reef.discovery.evaluation`), so it must not
import anything but the standard library. A `json` solution reaches `evaluate` parsed; a `python` one as its text,
which `evaluate` must run as a process of its own (`subprocess.run([sys.executable, "-c", solution], ...)`): compiling
it inside the evaluator's process is refused, since there it could write its own score.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib
import importlib.util
import inspect
import itertools
import json
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from reef.discovery.problems import BUILTIN

Direction = Literal["max", "min"]
SolutionFormat = Literal["json", "python"]

DEFAULT_PROMPT = """{task}

A previous attempt scored {score} ({better} is better). Evaluator output: {evaluator_tail}
Previous attempt:
{solution}

Write an improved solution. Reply with only the {format_name}."""

EVALUATOR_TAIL_CHARS = 400
MAX_ENUMERATED_EDITS = 512
_FENCE = re.compile(r"```[a-zA-Z]*\n?(.*?)```", re.DOTALL)


class ProblemError(ValueError):
    """A problem that cannot be loaded (no such module or directory, no `evaluate`, a malformed field)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Problem:
    """Everything the search needs of one problem."""

    name: str
    task: str
    direction: Direction
    solution_format: SolutionFormat
    seeds: tuple[str, ...]
    evaluator_source: str  # a stdlib-only Python module defining evaluate(solution, **options)
    options: dict[str, Any]
    prompt_template: str = DEFAULT_PROMPT
    best_known: float | None = None
    best_known_source: str | None = None  # where the best known value comes from
    solution_schema: dict[str, Any] | None = None  # JSON Schema of a `json` solution's shape
    edit_schema: dict[str, Any] | None = None  # JSON Schema of one edit, when answers are edits of the parent
    apply_edit: Callable[[Any, Any], Any] | None = dataclasses.field(default=None, compare=False, repr=False)

    @property
    def answer(self) -> str:
        """What the model writes: `edit` (of the parent, `edit_schema`) or `solution` (a whole one)."""
        return "edit" if self.edit_schema is not None else "solution"

    def response_format(self, parent: str | None = None) -> dict[str, Any] | None:
        """The OpenAI `response_format` that asks for an answer of the schema's shape (None: free text); given the
        `parent` solution, for an enumerable edit schema only the edits that change it (module docstring)."""
        name, schema = ("solution", self.solution_schema)
        if self.edit_schema is not None:
            name, schema = "edit", self.edit_schema
            useful = None if parent is None else self.useful_edits(parent)
            if useful:
                schema = {"anyOf": [_exactly(edit) for edit in useful]}
        if schema is None:
            return None
        return {"type": "json_schema", "json_schema": {"name": name, "strict": True, "schema": schema}}

    def useful_edits(self, parent: str) -> list[dict[str, Any]] | None:
        """Every edit of an all-`enum` object edit schema that applies to `parent` and changes it, in the schema's
        order; None when the edits cannot be enumerated (another schema, more than MAX_ENUMERATED_EDITS, or an
        `apply_edit` that raises something other than what `extract` treats as an inapplicable edit)."""
        properties = (self.edit_schema or {}).get("properties")
        if not isinstance(properties, dict) or not properties:
            return None
        found = [spec.get("enum") if isinstance(spec, dict) else None for spec in properties.values()]
        values = [v for v in found if isinstance(v, list) and v]
        if len(values) < len(found) or math.prod(len(v) for v in values) > MAX_ENUMERATED_EDITS:
            return None
        edits = [dict(zip(properties, combination, strict=True)) for combination in itertools.product(*values)]
        try:
            return [edit for edit in edits if self.extract(json.dumps(edit), parent) is not None]
        except Exception:  # noqa: BLE001 - the problem's own apply_edit failed in a way it does not document:
            return None  # offer the whole schema, as without enumeration; the client's extract will say more

    def reward(self, score: float | None, valid: bool) -> float:
        """Higher is better, 0 for an invalid attempt: the score itself when maximising, 1/score when minimising
        (a `min` problem's valid scores are positive)."""
        if not valid or score is None:
            return 0.0
        if self.direction == "max":
            return float(score)
        return 1.0 / float(score) if score > 0 else 0.0

    def prompt(self, solution: str, score: float | None, evaluator_output: str = "") -> str:
        """The prompt that asks for an improvement on a parent attempt (the template may name the options too)."""
        tail = evaluator_output[-EVALUATOR_TAIL_CHARS:].strip() or "(none)"
        return self.prompt_template.format(
            **self.options,
            task=self.task,
            solution=solution,
            score="invalid" if score is None else f"{score:.6g}",
            better="higher" if self.direction == "max" else "lower",
            evaluator_tail=tail,
            format_name="JSON" if self.solution_format == "json" else "Python program",
        )

    def extract(self, completion: str, parent: str | None = None) -> str | None:
        """The solution in a model's answer (inside a code fence if there is one), or None if it does not parse;
        for a problem whose answers are edits, the `parent` solution with the answer's edit applied (None when the
        edit cannot be applied)."""
        fenced = _FENCE.search(completion)
        text = (fenced.group(1) if fenced else completion).strip()
        if self.solution_format == "python":
            return text if parses(text, "python") else None
        found = _largest_json(text)
        if self.apply_edit is None or found is None:
            return found
        if parent is None:
            return None
        try:
            before = json.loads(parent)
            after = self.apply_edit(json.loads(parent), json.loads(found))
        except (ValueError, TypeError, KeyError, IndexError):
            return None
        edited = json.dumps(after, separators=(",", ":"))
        return edited if after != before and parses(edited, "json") else None


def _exactly(edit: dict[str, Any]) -> dict[str, Any]:
    """A JSON Schema that only `edit` meets."""
    return {
        "type": "object",
        "properties": {key: {"const": value} for key, value in edit.items()},
        "required": list(edit),
        "additionalProperties": False,
    }


def parses(solution: str, solution_format: SolutionFormat) -> bool:
    """Whether `solution` is valid JSON (finite numbers only) or a Python program that compiles."""
    try:
        if solution_format == "json":
            json.loads(solution, parse_constant=_refuse)
        else:
            ast.parse(solution)
    except (ValueError, SyntaxError, RecursionError):
        return False
    return True


def load_problem(name: str, options: dict[str, Any] | None = None) -> Problem:
    """The problem `name` (built-in, `package.module` or directory) with `options` over its defaults."""
    path = Path(name).expanduser()
    if path.is_dir():
        return _from_directory(path, options or {})
    module_name = BUILTIN.get(name, name)
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        known = ", ".join(BUILTIN)
        raise ProblemError(f"no problem {name!r}: not a built-in ({known}), module or directory") from error
    if not callable(getattr(module, "evaluate", None)):
        raise ProblemError(f"problem module {module_name!r} defines no evaluate(solution)")
    merged = {**getattr(module, "OPTIONS", {}), **(options or {})}
    best = getattr(module, "best_known", None)
    schema = getattr(module, "solution_schema", None)
    edit_schema = getattr(module, "edit_schema", None)
    edits = edit_schema(**merged) if callable(edit_schema) else None
    template = getattr(module, "PROMPT", DEFAULT_PROMPT)
    return _checked(
        name=getattr(module, "NAME", name),
        task=module.task(**merged),
        direction=getattr(module, "DIRECTION", "max"),
        solution_format=getattr(module, "SOLUTION_FORMAT", "json"),
        seeds=tuple(module.seeds(**merged)),
        evaluator_source=inspect.getsource(module),
        options=merged,
        prompt_template=template(**merged) if callable(template) else template,
        best_known=best(**merged) if callable(best) else None,
        best_known_source=getattr(module, "BEST_KNOWN_SOURCE", None),
        solution_schema=schema(**merged) if callable(schema) else None,
        edit_schema=edits,
        apply_edit=_bound(getattr(module, "apply_edit", None), merged) if edits is not None else None,
    )


def _from_directory(path: Path, options: dict[str, Any]) -> Problem:
    evaluator = path / "evaluate.py"
    if not evaluator.is_file():
        raise ProblemError(f"problem directory {str(path)!r} has no evaluate.py")
    source = evaluator.read_text()
    if not any(isinstance(n, ast.FunctionDef) and n.name == "evaluate" for n in ast.parse(source).body):
        raise ProblemError(f"{str(evaluator)!r} defines no evaluate(solution)")
    try:
        spec = json.loads((path / "problem.json").read_text())
    except (OSError, ValueError) as error:
        raise ProblemError(f"problem directory {str(path)!r} needs a readable problem.json: {error}") from error
    solution_format = spec.get("solution_format", "json")
    seeds = [s if isinstance(s, str) else json.dumps(s, separators=(",", ":")) for s in spec.get("seeds", [])]
    merged = {**spec.get("options", {}), **options}
    edits = spec.get("edit_schema")
    return _checked(
        name=str(spec.get("name", path.name)),
        task=str(spec.get("task", "")),
        direction=spec.get("direction", "max"),
        solution_format=solution_format,
        seeds=tuple(seeds),
        evaluator_source=source,
        options=merged,
        prompt_template=str(spec.get("prompt", DEFAULT_PROMPT)),
        best_known=spec.get("best_known"),
        best_known_source=spec.get("best_known_source"),
        solution_schema=spec.get("solution_schema"),
        edit_schema=edits,
        apply_edit=_bound(_module_function(evaluator, "apply_edit"), merged) if edits is not None else None,
    )


def _checked(**fields: Any) -> Problem:
    if fields["direction"] not in ("max", "min"):
        raise ProblemError(f"direction must be 'max' or 'min', not {fields['direction']!r}")
    if fields["solution_format"] not in ("json", "python"):
        raise ProblemError(f"solution_format must be 'json' or 'python', not {fields['solution_format']!r}")
    if not fields["seeds"]:
        raise ProblemError(f"problem {fields['name']!r} has no seed solutions")
    schema = fields.get("solution_schema")
    if schema is not None and (fields["solution_format"] != "json" or not isinstance(schema, dict)):
        raise ProblemError("solution_schema must be a JSON Schema object, and only for a json solution_format")
    edits = fields.get("edit_schema")
    if edits is not None and (fields["solution_format"] != "json" or not isinstance(edits, dict)):
        raise ProblemError("edit_schema must be a JSON Schema object, and only for a json solution_format")
    if edits is not None and fields.get("apply_edit") is None:
        raise ProblemError(f"problem {fields['name']!r} has an edit_schema but defines no apply_edit(solution, edit)")
    bad = [s for s in fields["seeds"] if not parses(s, fields["solution_format"])]
    if bad:
        raise ProblemError(f"seed {bad[0][:60]!r} is not a valid {fields['solution_format']} solution")
    return Problem(**fields)


def _bound(function: Any, options: dict[str, Any]) -> Callable[[Any, Any], Any] | None:
    """`function(solution, edit, **options)` as a function of (solution, edit), or None when it is not callable."""
    return functools.partial(function, **options) if callable(function) else None


def _module_function(path: Path, name: str) -> Any:
    """`name` from the Python file at `path`, loaded in this process (a problem directory's own code)."""
    spec = importlib.util.spec_from_file_location(f"reef_problem_{abs(hash(str(path)))}", path)
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as error:  # the user's file: any failure to load is a problem that cannot be loaded
        raise ProblemError(f"{str(path)!r} could not be loaded for {name}: {error}") from error
    return getattr(module, name, None)


def _largest_json(text: str) -> str | None:
    """The longest JSON array or object in `text` (a small model wraps its answer in prose, or quotes its parent)."""
    decoder, found = json.JSONDecoder(parse_constant=_refuse), None
    for start, char in enumerate(text):
        if char not in "[{":
            continue
        try:
            value, end = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):
            continue
        if found is None or end - start > found[0]:
            found = (end - start, value)
    return None if found is None else json.dumps(found[1], separators=(",", ":"))


def _refuse(constant: str) -> Any:
    raise ValueError(f"{constant} is not a finite number")
