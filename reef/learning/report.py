"""A recipe's report type: one pydantic model gives the JSON Schema a client reads (GET /reef/scenarios/{s}/contract)
and the validation `POST /reef/report` runs (`parse_report`).

A recipe declares `report_model`, a subclass of `Report` that narrows what it reads (`metadata` as a `Metadata`
model of its own, a narrower `score`) and, in `check`, the rules that depend on its configuration (a grid's bounds)
or on several fields at once. Its docstring is the schema's `description`: what the recipe trains from. A report that
merely lacks what the recipe trains from is well-formed: it is stored, and the processor skips it, counting the
reason (`skipped_counts`). The processor reads each stored report as the same model (`read_report`).
"""

from __future__ import annotations

import copy
import math
from typing import Annotated, Any, Protocol, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
    field_validator,
)

from reef.core.errors import BadRequest
from reef.core.identifiers import RECORD_ID_PATTERN

Receipt = Annotated[str, Field(pattern=RECORD_ID_PATTERN)]


def refusing(message: str) -> WrapValidator:
    """A field's validation with one message for whatever does not fit its type (`must be a non-empty string`)."""

    def validate(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        try:
            return handler(value)
        except ValidationError:
            raise ValueError(message) from None

    return WrapValidator(validate)


class Metadata(BaseModel):
    """A report's `metadata`: a recipe's subclass declares the keys it reads; any other key is kept, unread."""

    model_config = ConfigDict(extra="allow")

    def get(self, key: str, default: Any = None) -> Any:
        """The value of `key` (a declared field or any other key the client sent), or `default`."""
        value = getattr(self, key, None) if key in type(self).model_fields else (self.model_extra or {}).get(key)
        return default if value is None else value


class Content(BaseModel):
    """Text sent as `{"content": …}` (the shape of a chat message)."""

    model_config = ConfigDict(extra="allow")

    content: Annotated[str, StringConstraints(pattern=r"\S")]


# A text a recipe reads: a non-blank string, or `{"content": a non-blank string}`.
Text = Annotated[
    Annotated[str, StringConstraints(pattern=r"\S")] | Content,
    refusing('must be a non-empty string (or {"content": a non-empty string})'),
]


def text_of(value: str | Content | None) -> str | None:
    """The string a `Text` field holds, or None."""
    return value.content if isinstance(value, Content) else value


ReportT = TypeVar("ReportT", bound="Report")


class ReportTaker(Protocol):
    """What a report's checks read of the recipe that takes it (a `Recipe` is one)."""

    @property
    def name(self) -> str: ...

    @property
    def report_model(self) -> type[Report]: ...

    @property
    def recipe_config(self) -> BaseModel | dict[str, Any]: ...


class Report(BaseModel):
    """Any well-formed report."""

    model_config = ConfigDict(
        extra="forbid",
        title="POST /reef/report",
        json_schema_extra={"$schema": "https://json-schema.org/draft/2020-12/schema"},
    )

    score: float | None = Field(None, description="finite; booleans are refused")
    feedback: str | dict[str, Any] | None = Field(None, description="free text or an object the recipe reads")
    references: list[Receipt] | None = Field(
        None,
        description="receipts (x-reef-agent-record-id) of this scenario's inferences",
        json_schema_extra={"uniqueItems": True},
    )
    metadata: Metadata | None = Field(None, description="recipe-specific fields")
    agent_record_id: Receipt | None = Field(None, description="the report's own id, for safe retries")

    @field_validator("score", mode="before")
    @classmethod
    def _finite_number(cls, value: Any) -> Any:
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise ValueError("must be a number (booleans are not scores)")
        if value is not None and not math.isfinite(value):
            raise ValueError("must be finite")
        return value

    def check(self, recipe: ReportTaker) -> None:
        """Raise BadRequest naming a field this recipe reads that its configuration makes malformed (nothing by
        default)."""

    @classmethod
    def json_schema(cls, recipe: ReportTaker) -> dict[str, Any]:
        """The JSON Schema of a report `recipe` takes (the model's, with what it trains from as `description`)."""
        return cls.model_json_schema()


def parse_report(recipe: ReportTaker, payload: dict[str, Any]) -> Report:
    """`payload` as `recipe.report_model`; BadRequest naming the first malformed field (`metadata.demonstration`)."""
    try:
        report = recipe.report_model.model_validate(payload)
    except ValidationError as exc:
        first = exc.errors()[0]
        message = first["msg"].removeprefix("Value error, ")
        if first["type"] == "extra_forbidden":
            message = "unknown field"
        raise BadRequest(message, field=field_name(first["loc"]) or None) from None
    report.check(recipe)
    return report


def read_report(model: type[ReportT], record_id: str, payload: dict[str, Any]) -> ReportT | None:
    """A stored report's body as `model`, its `agent_record_id` the record's; None when it does not fit the model
    (a report stored by an older version, or imported as given). Keys that are no report field are left out."""
    try:
        report = model.model_validate({key: value for key, value in payload.items() if key in model.model_fields})
    except ValidationError:
        return None
    return report.model_copy(update={"agent_record_id": record_id})


_UNION_TAGS = ("str", "int", "float", "bool", "list", "dict", "none", "function-")


def field_name(loc: tuple[int | str, ...]) -> str:
    """A validation error's location as the dotted field a client sent (`metadata.demonstration`,
    `references[0]`), without pydantic's union-member tags (`str`, `dict[str,any]`, a model's class name)."""
    name = ""
    for part in loc:
        if isinstance(part, int):
            name += f"[{part}]"
        elif not (part.startswith(_UNION_TAGS) or part[:1].isupper() or "[" in part):
            name += f".{part}" if name else part
    return name


def narrowed(
    base: dict[str, Any],
    *,
    metadata: dict[str, Any] | None = None,
    score: dict[str, Any] | None = None,
    feedback: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A copy of a report model's schema `base` with the rules its configuration decides: keywords added to the
    `metadata` properties the model declares (`{name: keywords}`, a grid's bounds), to `score`, and a narrower
    `feedback`."""
    schema = copy.deepcopy(base)
    properties = schema["properties"]
    if score:
        properties["score"].update(score)
    if feedback:
        properties["feedback"] = {**feedback, "description": feedback.get("description", "")}
    if metadata:
        (model,) = (option["$ref"].rsplit("/", 1)[-1] for option in properties["metadata"]["anyOf"] if "$ref" in option)
        for name, keywords in metadata.items():
            schema["$defs"][model]["properties"][name].update(keywords)
    return schema


def with_grid_cell(schema: dict[str, Any], cell: tuple[str, ...], required: tuple[str, ...]) -> dict[str, Any]:
    """`schema` where a report that claims a grid cell (its metadata names any of `cell`) must be a whole one: every
    `cell` key in its metadata and the top-level `required` fields (a discovery grid is incomplete without them).
    A report that claims no cell is taken as it is, and the recipe skips it."""
    claims = {"anyOf": [{"required": [key]} for key in cell]}
    whole: dict[str, Any] = {"required": list(required), "properties": {"metadata": {"required": list(cell)}}}
    if "references" in required:
        whole["properties"]["references"] = {"minItems": 1}
    schema["if"] = {"properties": {"metadata": claims}, "required": ["metadata"]}
    schema["then"] = whole
    return schema
