"""Values and errors shared by every layer; nothing here does I/O."""

from reef.core.errors import (
    BadRequest,
    Conflict,
    NotFound,
    PayloadTooLarge,
    ReefError,
    Unauthorized,
    Unavailable,
    UpstreamError,
    UpstreamTimeout,
)
from reef.core.records import Record, RequestType, content_hash, new_record_id
from reef.core.releases import Commit, Release, ReleaseOperation, Verdict
from reef.core.scenarios import Dialect, validate_scenario_name

__all__ = [
    "BadRequest",
    "Commit",
    "Conflict",
    "Dialect",
    "NotFound",
    "PayloadTooLarge",
    "Record",
    "ReefError",
    "Release",
    "ReleaseOperation",
    "RequestType",
    "Unauthorized",
    "Unavailable",
    "UpstreamError",
    "UpstreamTimeout",
    "Verdict",
    "content_hash",
    "new_record_id",
    "validate_scenario_name",
]
