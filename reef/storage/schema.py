"""The record store's tables, shared by SQLite and PostgreSQL (SQLAlchemy Core), and how a `Record` maps to a row."""

from __future__ import annotations

from typing import Any

import orjson
import sqlalchemy as sa

from reef.core.records import Record

metadata = sa.MetaData()

records = sa.Table(
    "reef_records",
    metadata,
    sa.Column("agent_record_id", sa.String(200), primary_key=True),
    sa.Column("scenario", sa.String(128), nullable=False),
    sa.Column("sequence", sa.BigInteger, nullable=False),
    sa.Column("request_type", sa.String(16), nullable=False),
    # JSON text written by orjson; NULL once retention evicted the body (the hash is kept).
    sa.Column("payload", sa.Text, nullable=True),
    sa.Column("body_bytes", sa.BigInteger, nullable=False),
    sa.Column("content_hash", sa.String(64), nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("consumed_step", sa.BigInteger, nullable=True),
    sa.UniqueConstraint("scenario", "sequence", name="reef_records_scenario_sequence"),
    # Retention walks bodies oldest first.
    sa.Index("reef_records_created_at", "created_at"),
)

# One row per scenario that holds records: the last sequence handed out. Incrementing it inside the
# appending transaction locks the row, so sequences rise in commit order even across PostgreSQL replicas.
sequences = sa.Table(
    "reef_sequences",
    metadata,
    sa.Column("scenario", sa.String(128), primary_key=True),
    sa.Column("last_sequence", sa.BigInteger, nullable=False),
)

scenarios = sa.Table(
    "reef_scenarios",
    metadata,
    sa.Column("name", sa.String(128), primary_key=True),
    sa.Column("recipe", sa.String(300), nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("archived", sa.Boolean, nullable=False, default=False),
)

# How a scenario is trained, as operators set it (POST /reef/scenarios/{s}/update, /reef/train). A row exists only
# once something was set; a scenario without one trains in the deployment's `learning.mode`.
scenario_controls = sa.Table(
    "reef_scenario_controls",
    metadata,
    sa.Column("name", sa.String(128), primary_key=True),
    sa.Column("training_mode", sa.String(16), nullable=True),
    sa.Column("paused", sa.Boolean, nullable=False, default=False),
    # A requested step not yet committed (JSON text): a restart runs it.
    sa.Column("request", sa.Text, nullable=True),
    sa.Column("updated_at", sa.Float, nullable=False),
)

# Which report cites which receipt, written in the report's append transaction (and kept when its body is
# evicted), so "who cites this inference?" is one index lookup instead of a scan of the scenario's reports.
citations = sa.Table(
    "reef_citations",
    metadata,
    sa.Column("report_id", sa.String(200), primary_key=True),
    sa.Column("inference_id", sa.String(200), primary_key=True),
    sa.Column("scenario", sa.String(128), nullable=False),
    sa.Index("reef_citations_inference", "inference_id"),
)


# A scenario's rollout mode and its current (or last) rollout as a JSON document; `version` rises with each write
# of the document, which is compare-and-swap on it, so of two replicas ending a rollout exactly one writes.
rollouts = sa.Table(
    "reef_rollouts",
    metadata,
    sa.Column("name", sa.String(128), primary_key=True),
    sa.Column("mode", sa.String(16), nullable=True),
    sa.Column("document", sa.Text, nullable=True),
    sa.Column("version", sa.BigInteger, nullable=False, default=0),
    sa.Column("updated_at", sa.Float, nullable=False),
)

# Failed requests (5xx, timeouts) per rollout arm, counted by whichever replica served them (they leave no record).
rollout_errors = sa.Table(
    "reef_rollout_errors",
    metadata,
    sa.Column("rollout_id", sa.String(64), primary_key=True),
    sa.Column("arm", sa.String(16), primary_key=True),
    sa.Column("errors", sa.BigInteger, nullable=False),
)


def record_row(record: Record) -> dict[str, Any]:
    """The `reef_records` row for `record`, without its sequence (assigned at commit)."""
    body = orjson.dumps(record.payload) if record.payload is not None else None
    return {
        "agent_record_id": record.agent_record_id,
        "scenario": record.scenario,
        "request_type": record.request_type,
        "payload": body.decode() if body is not None else None,
        "body_bytes": len(body) if body is not None else 0,
        "content_hash": record.content_hash,
        "created_at": record.created_at,
        "consumed_step": None,
    }


def record_from_row(row: sa.RowMapping) -> Record:
    """The `Record` a `reef_records` row holds (payload None once evicted)."""
    text = row["payload"]
    return Record(
        agent_record_id=row["agent_record_id"],
        scenario=row["scenario"],
        request_type=row["request_type"],
        payload=orjson.loads(text) if text is not None else None,
        content_hash=row["content_hash"],
        created_at=row["created_at"],
        sequence=row["sequence"],
        consumed_step=row["consumed_step"],
        body_bytes=row["body_bytes"],
    )
