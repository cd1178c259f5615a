"""How a route hands the runtime's typed answer to the framework: as the plain JSON object it already is.

A route's return annotation stays `dict[str, Any]`, so the framework neither re-validates an answer nor changes the
API document; the answer's type is checked where it is built (`reef.core.views`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def as_json(answer: Mapping[str, Any]) -> dict[str, Any]:
    """`answer` as a plain JSON object (a shallow copy)."""
    return dict(answer)
