"""`SqlCommitLog`: the learner's step log in the shared PostgreSQL database, for replicas on many machines.

Replicas on many machines share no directory, so the file commit log of one would be invisible to the next leader:
it would count steps from 0 again and could not repair a step its predecessor committed but did not mark. Here
each step is one row, committed (and so durable: PostgreSQL fsyncs its WAL at commit) before `append` returns.
`(scenario, step)` is the primary key: two writers of one step is a bug the election rules out, and it fails.
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa

from reef.core.releases import Commit
from reef.releases.base import CommitLog
from reef.releases.commit_log import FileCommitLog
from reef.releases.names import decode_name

_metadata = sa.MetaData()
learner_commits = sa.Table(
    "learner_commits",
    _metadata,
    sa.Column("scenario", sa.Text, primary_key=True),
    sa.Column("step", sa.Integer, primary_key=True),
    sa.Column("body", sa.Text, nullable=False),
)


class SqlCommitLog(CommitLog):
    """Commits as JSON rows of `learner_commits` (created if missing) in the database `engine` points at."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine
        with engine.begin() as conn:
            _metadata.create_all(conn)

    def adopt(self, files: FileCommitLog) -> list[str]:
        """Copy in the steps of every scenario that has a file log but no step here yet (a deployment that ran on
        PostgreSQL before its commit log moved into the database); the scenarios copied."""
        adopted = []
        for path in sorted(files.directory.glob("*.jsonl")):
            scenario = decode_name(path.stem)
            if self.last(scenario) is not None:
                continue
            steps = files.list(scenario, -1, 1 << 30)
            if steps:
                with self.engine.begin() as conn:
                    conn.execute(learner_commits.insert(), [_row(commit) for commit in steps])
                adopted.append(scenario)
        return adopted

    def append(self, commit: Commit) -> None:
        with self.engine.begin() as conn:
            conn.execute(learner_commits.insert().values(**_row(commit)))

    def list(
        self, scenario: str, after_step: int = -1, limit: int = 100, *, record_id: str | None = None
    ) -> list[Commit]:
        if limit <= 0:
            return []
        query = (
            sa.select(learner_commits.c.body)
            .where(learner_commits.c.scenario == scenario, learner_commits.c.step > after_step)
            .order_by(learner_commits.c.step)
        )
        if record_id is None:
            query = query.limit(limit)
        else:  # the id as json.dumps writes it, then checked exactly
            query = query.where(learner_commits.c.body.contains(json.dumps(record_id), autoescape=True))
        found = []
        with self.engine.connect() as conn:
            for (body,) in conn.execute(query):
                commit = _commit(body)
                if record_id is not None and record_id not in commit.consumed_record_ids:
                    continue
                found.append(commit)
                if len(found) >= limit:
                    break
        return found

    def last(self, scenario: str) -> Commit | None:
        query = (
            sa.select(learner_commits.c.body)
            .where(learner_commits.c.scenario == scenario)
            .order_by(learner_commits.c.step.desc())
            .limit(1)
        )
        with self.engine.connect() as conn:
            body = conn.execute(query).scalar()
        return _commit(body) if body is not None else None


def _row(commit: Commit) -> dict[str, Any]:
    body = json.dumps(commit.to_json(), separators=(",", ":"), sort_keys=True)
    return {"scenario": commit.scenario, "step": commit.step, "body": body}


def _commit(body: str) -> Commit:
    data: dict[str, Any] = json.loads(body)
    return Commit.from_json(data)
