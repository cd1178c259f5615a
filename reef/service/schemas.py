"""Request bodies of the `/reef/*` routes (validated once at the edge; they also document the OpenAPI schema)."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator

_ID_PATTERN = r"^[A-Za-z0-9._:-]{1,200}$"


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ReportBody(_Body):
    """`POST /reef/report`: a score and/or feedback about earlier interactions (cited by receipt)."""

    score: float | None = Field(None, description="finite number; booleans are refused")
    feedback: str | dict[str, Any] | None = Field(None, description="opaque to the core; recipes read it")
    references: list[str] | None = Field(None, description="receipts of inference records of the same scenario")
    metadata: dict[str, Any] | None = Field(None, description="recipe-specific fields")
    agent_record_id: str | None = Field(None, pattern=_ID_PATTERN, description="the report's own id (retries)")

    @field_validator("score", mode="before")
    @classmethod
    def _finite_number(cls, value: Any) -> Any:
        if value is None:
            return value
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError("must be a number (booleans are not scores)")
        if not math.isfinite(value):
            raise ValueError("must be finite")
        return value

    @field_validator("references")
    @classmethod
    def _unique(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and len(set(value)) != len(value):
            raise ValueError("receipts must be unique")
        return value

    def payload(self) -> dict[str, Any]:
        """What the record stores (everything but the report's own id), without absent fields."""
        return self.model_dump(exclude={"agent_record_id"}, exclude_none=True)


class RecordImport(_Body):
    """One record imported without calling a model."""

    agent_record_id: str | None = Field(None, pattern=_ID_PATTERN)
    request_type: Literal["inference", "report"]
    payload: dict[str, Any]


class RecordImportBatch(_Body):
    records: list[RecordImport] = Field(..., min_length=1, max_length=1000)


class ScenarioCreate(_Body):
    name: str = Field(..., pattern=r"^[A-Za-z0-9._:-]{1,128}$")
    release_id: str | None = None


class ReleaseChoice(_Body):
    release_id: str = Field(..., min_length=1, max_length=200)


class ScenarioUpdate(_Body):
    """`POST /reef/scenarios/{s}/update`: how the scenario trains."""

    training_mode: Literal["auto", "manual", "hybrid"] | None = Field(
        None, description="auto: steps on full batches; manual: only requested steps; hybrid: both"
    )
    paused: StrictBool | None = Field(None, description="true: no learner step starts until resumed")
    rollout_mode: Literal["immediate", "canary"] | None = Field(
        None, description="immediate: an accepted release serves at once; canary: it earns its traffic in a rollout"
    )


class RolloutAction(_Body):
    """`POST /reef/scenarios/{s}/rollout`: end the open rollout now."""

    action: Literal["promote", "rollback"] = Field(
        ..., description="promote: the canary serves everything; rollback: the incumbent serves everything"
    )


class TrainRequest(_Body):
    """`POST /reef/train`: ask for one learner step now."""

    text: str | None = Field(None, min_length=1, max_length=65536, description="an instruction handed to the recipe")
    release_id: str | None = Field(None, min_length=1, max_length=200, description="train from this release")
