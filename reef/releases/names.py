"""Where a scenario's releases live in the repository: ref names, and file names derived from scenario names.

Scenario names may hold `:` and `.` (even `..`), which git refuses in ref names and which are awkward in file
names, so both are percent-encoded; every other allowed character passes through, keeping refs readable.
"""

from __future__ import annotations

from urllib.parse import unquote

SCENARIOS_NAMESPACE = "refs/reef/scenarios"
PENDING_NAMESPACE = "refs/reef/pending"
ARCHIVE_NAMESPACE = "refs/reef/archive"
LINEAGE_NAMESPACE = "refs/reef/lineage"


def encode_name(scenario: str) -> str:
    """`scenario` as a single ref component / file name (reversible with `decode_name`)."""
    return scenario.replace("%", "%25").replace(".", "%2E").replace(":", "%3A")


def decode_name(encoded: str) -> str:
    return unquote(encoded)


def head_ref(scenario: str) -> str:
    """The ref whose commit is the serving release of `scenario`."""
    return f"{SCENARIOS_NAMESPACE}/{encode_name(scenario)}/head"


def scenario_prefix(scenario: str) -> str:
    return f"{SCENARIOS_NAMESPACE}/{encode_name(scenario)}"


def pending_prefix(scenario: str) -> str:
    """Pending releases are stored (one ref each, so they are kept) but never served."""
    return f"{PENDING_NAMESPACE}/{encode_name(scenario)}"


def pending_ref(scenario: str, release_id: str) -> str:
    return f"{pending_prefix(scenario)}/{release_id}"


def lineage_ref(scenario: str) -> str:
    """The tip of the scenario's working lineage: candidates that tied, trained on one after another."""
    return f"{LINEAGE_NAMESPACE}/{encode_name(scenario)}"


def archive_prefix(scenario: str, stamp: str) -> str:
    return f"{ARCHIVE_NAMESPACE}/{encode_name(scenario)}-{stamp}"
