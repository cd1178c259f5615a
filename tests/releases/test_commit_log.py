"""The file commit log: append-only JSON lines per scenario, durable, tolerant of a torn last line."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from reef.core.releases import Commit, LineageTip
from reef.releases import FileCommitLog, commit_log


def commit(step: int, scenario: str = "demo", verdict: str = "published") -> Commit:
    return Commit(
        scenario=scenario,
        step=step,
        verdict=verdict,  # type: ignore[arg-type]
        reason="wins - losses = 3",
        release_id=f"{step:040x}",
        parent_release_id=None,
        candidate_scores=[1.0, 0.0],
        current_scores=[0.0, 0.0],
        metrics={"loss": 0.5},
        consumed_record_ids=[f"rec-{step}"],
        created_at=time.time(),
    )


def test_appended_steps_are_listed_in_order_after_a_step_and_up_to_a_limit(tmp_path):
    log = FileCommitLog(tmp_path / "commits")
    appended = [commit(step) for step in range(1, 6)]
    for entry in appended:
        log.append(entry)
    assert [c.step for c in log.list("demo")] == [1, 2, 3, 4, 5]
    assert [c.step for c in log.list("demo", after_step=2)] == [3, 4, 5]
    assert [c.step for c in log.list("demo", after_step=1, limit=2)] == [2, 3]
    assert log.list("demo") == appended


def test_last_is_the_latest_step_or_none(tmp_path):
    log = FileCommitLog(tmp_path / "commits")
    assert log.last("demo") is None
    log.append(commit(1))
    log.append(commit(2, verdict="rejected"))
    last = log.last("demo")
    assert last is not None and last.step == 2 and last.verdict == "rejected"


def test_each_scenario_has_its_own_file_and_steps(tmp_path):
    log = FileCommitLog(tmp_path / "commits")
    log.append(commit(1, "alpha"))
    log.append(commit(1, "team:beta"))
    log.append(commit(2, "alpha"))
    assert [c.step for c in log.list("alpha")] == [1, 2]
    assert [c.scenario for c in log.list("team:beta")] == ["team:beta"]
    assert (tmp_path / "commits" / "alpha.jsonl").exists()
    assert len(list((tmp_path / "commits").iterdir())) == 2


def test_a_reopened_log_reads_what_was_appended_before(tmp_path):
    FileCommitLog(tmp_path / "commits").append(commit(7))
    reopened = FileCommitLog(tmp_path / "commits")
    assert [c.step for c in reopened.list("demo")] == [7]
    assert reopened.last("demo").step == 7


def test_a_torn_last_line_is_ignored_and_cut_off_by_the_next_append(tmp_path):
    log = FileCommitLog(tmp_path / "commits")
    log.append(commit(1))
    log.append(commit(2))
    path: Path = log.path("demo")
    whole = path.read_bytes()
    path.write_bytes(whole + b'{"scenario": "demo", "step": 3, "verd')  # a crash mid-append
    after_crash = FileCommitLog(tmp_path / "commits")
    assert [c.step for c in after_crash.list("demo")] == [1, 2]
    assert after_crash.last("demo").step == 2
    after_crash.append(commit(3))
    assert [c.step for c in after_crash.list("demo")] == [1, 2, 3]
    assert path.read_bytes().startswith(whole)
    assert path.read_bytes().count(b"\n") == 3


def test_a_complete_but_unparsable_last_line_is_ignored_too(tmp_path):
    log = FileCommitLog(tmp_path / "commits")
    log.append(commit(1))
    with open(log.path("demo"), "ab") as handle:
        handle.write(b"\x00\x00\x00\n")  # a crash on a filesystem that zero-fills the tail
    assert [c.step for c in log.list("demo")] == [1]
    assert log.last("demo").step == 1


def test_last_finds_the_latest_step_reading_back_over_several_blocks(tmp_path, monkeypatch):
    monkeypatch.setattr(commit_log, "_TAIL_BLOCK_BYTES", 64)  # lines are ~300 bytes: several growing reads
    log = FileCommitLog(tmp_path / "commits")
    for step in range(1, 21):
        log.append(commit(step))
    with open(log.path("demo"), "ab") as handle:
        handle.write(b'{"torn": ')
    assert log.last("demo").step == 20
    assert len(log.list("demo", limit=1000)) == 20


def test_a_step_written_before_trained_from_was_a_field_still_loads_with_the_lineage_it_names(tmp_path):
    log = FileCommitLog(tmp_path / "commits")
    old = (
        '{"candidate_scores":[1.0],"consumed_record_ids":["rec-1"],"created_at":1700000000.0,'
        '"current_scores":[0.0],"metrics":{"lineage":null},"parent_release_id":null,"reason":"wins",'
        f'"release_id":"{"a" * 40}","scenario":"demo","step":1,"verdict":"published"}}\n'
    )
    log.path("demo").write_text(old)
    (loaded,) = log.list("demo", record_id="rec-1")
    assert loaded.trained_from is None and loaded.consumed_record_ids == ["rec-1"]
    assert loaded.lineage == LineageTip(None) and loaded.metrics == {} and log.last("demo") == loaded
    assert loaded.to_json()["metrics"] == {"lineage": None}


def test_the_lineage_a_judged_step_names_is_a_field_shown_in_its_metrics(tmp_path):
    log = FileCommitLog(tmp_path / "commits")
    kept = dataclasses.replace(commit(1, verdict="kept"), lineage=LineageTip("b" * 40))
    log.append(kept)
    log.append(commit(2, verdict="skipped"))
    first, second = log.list("demo")
    assert first == kept and first.to_json()["metrics"] == {"loss": 0.5, "lineage": "b" * 40}
    assert second.lineage is None and "lineage" not in second.to_json()["metrics"]
    assert set(first.to_json()) == {field.name for field in dataclasses.fields(Commit)} - {"lineage"}
