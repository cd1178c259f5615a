"""The shapes of the names and ids a client sends: one pattern each, read by the validation and the API document."""

from __future__ import annotations

# A scenario name: 1-128 characters of A-Z a-z 0-9 . _ : -
SCENARIO_NAME_PATTERN = r"^[A-Za-z0-9._:-]{1,128}$"
# A record id (a receipt, or the id a client gives an imported record or a report): 1-200 of the same characters.
RECORD_ID_PATTERN = r"^[A-Za-z0-9._:-]{1,200}$"
# A release id as a client names one (in a body, a query or a path): the same shape as a record id.
RELEASE_ID_PATTERN = RECORD_ID_PATTERN
