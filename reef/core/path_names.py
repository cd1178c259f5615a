"""Names from clients that become part of a filesystem path: checked, then encoded as one path component.

A name equal to `.` or `..`, or holding `/`, `\\` or NUL, is refused (BadRequest naming the field); dots inside a
name stay legal (`heldout.jsonl:3`, `my.scenario`). `path_component` then percent-encodes what file systems or
readers trip over (`%`, `:`), so a checked name is always exactly one component under its directory.
"""

from __future__ import annotations

from reef.core.errors import BadRequest

_FORBIDDEN = ("/", "\\", "\0")


def check_path_name(name: str, field: str) -> str:
    """`name` if it can name one file or directory, else BadRequest naming `field`."""
    if not isinstance(name, str) or not name:
        raise BadRequest("must be a non-empty string", field=field)
    if name in (".", ".."):
        raise BadRequest(f"{name!r} is not a name", field=field)
    if any(character in name for character in _FORBIDDEN):
        raise BadRequest("must not hold '/', '\\' or NUL", field=field)
    return name


def path_component(name: str, field: str = "name") -> str:
    """A checked `name` as one path component (`%` and `:` percent-encoded)."""
    return check_path_name(name, field).replace("%", "%25").replace(":", "%3A")
