"""`CommitLog.list(record_id=...)`: which step(s) consumed a record, on the file commit log."""

from __future__ import annotations

import dataclasses

from reef.releases import FileCommitLog

from .test_commit_log import commit


def test_only_the_steps_that_consumed_the_record_are_listed(tmp_path):
    log = FileCommitLog(tmp_path / "commits")
    log.append(dataclasses.replace(commit(1), consumed_record_ids=["rec-1", "rec-2"]))
    log.append(dataclasses.replace(commit(2), consumed_record_ids=["rec-10"]))  # "rec-1" is a prefix, not a match
    log.append(dataclasses.replace(commit(3, verdict="rejected"), consumed_record_ids=["rec-2"], reason="rec-1"))
    log.append(dataclasses.replace(commit(4), consumed_record_ids=["rec-2"]))

    assert [c.step for c in log.list("demo", record_id="rec-1")] == [1]  # a mention elsewhere is no consumption
    assert [c.step for c in log.list("demo", record_id="rec-10")] == [2]
    assert [c.step for c in log.list("demo", record_id="rec-2")] == [1, 3, 4]
    assert [c.step for c in log.list("demo", record_id="rec-2", after_step=1, limit=1)] == [3]
    assert log.list("demo", record_id="rec-unknown") == []
    assert log.list("elsewhere", record_id="rec-1") == []


def test_an_id_that_json_escapes_is_still_found(tmp_path):
    log = FileCommitLog(tmp_path / "commits")
    odd = 'rec-"ü"\\'
    log.append(dataclasses.replace(commit(1), consumed_record_ids=[odd]))
    assert [c.step for c in log.list("demo", record_id=odd)] == [1]
