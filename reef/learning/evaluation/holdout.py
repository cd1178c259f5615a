"""The held-out split of a scenario's own feedback: which reports with a known answer become gate tasks.

A report is held out when a hash of its id falls in one of `every` buckets: the decision needs nothing but the
id, so it is the same in every process and after every restart, whatever order records are read in. A held-out
report is never trained on (and never consumed): it is the gate's evidence that a candidate answers prompts it
has not seen better than the serving release does.
"""

from __future__ import annotations

import hashlib


def is_held_out(report_id: str, every: int) -> bool:
    """Whether the report `report_id` belongs to the held-out split (about one in `every`; never for 0)."""
    if every <= 0:
        return False
    digest = hashlib.sha256(report_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") % every == 0
