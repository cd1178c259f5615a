"""The model cache's `converted_once`: built once, kept, and never built twice side by side."""

from __future__ import annotations

import threading
from pathlib import Path

from reef.inference.local.model_files import converted_once


def test_a_conversion_is_built_once_and_kept(tmp_path: Path) -> None:
    source = tmp_path / "model.gguf"
    source.write_bytes(b"weights")
    builds: list[Path] = []

    def build(out: Path) -> None:
        builds.append(out)
        out.write_text("converted")

    first = converted_once(source, tmp_path / "cache", ".x", build)
    assert first.read_text() == "converted" and len(builds) == 1
    assert converted_once(source, tmp_path / "cache", ".x", build) == first
    assert len(builds) == 1
    assert [path.name for path in (tmp_path / "cache").iterdir() if path.name != ".locks"] == [first.name]


def test_a_failed_build_leaves_no_entry_and_the_next_call_builds_it(tmp_path: Path) -> None:
    source = tmp_path / "model.gguf"
    source.write_bytes(b"weights")

    def broken(out: Path) -> None:
        out.write_text("half")
        raise RuntimeError("crashed mid-way")

    try:
        converted_once(source, tmp_path / "cache", ".x", broken)
    except RuntimeError:
        pass
    assert [path for path in (tmp_path / "cache").iterdir() if path.name != ".locks"] == []
    done = converted_once(source, tmp_path / "cache", ".x", lambda out: out.write_text("whole"))
    assert done.read_text() == "whole"


def test_a_second_caller_waits_for_the_first_build_instead_of_building_beside_it(tmp_path: Path) -> None:
    source = tmp_path / "model.gguf"
    source.write_bytes(b"weights")
    first_building, second_calling = threading.Event(), threading.Event()
    builds: list[str] = []
    results: dict[str, Path] = {}

    def slow_build(out: Path) -> None:
        builds.append("first")
        first_building.set()
        assert second_calling.wait(60)  # the second caller is on its way while this build is not yet in place
        out.write_text("converted")

    def first() -> None:
        results["first"] = converted_once(source, tmp_path / "cache", ".x", slow_build)

    thread = threading.Thread(target=first)
    thread.start()
    assert first_building.wait(60)
    second_calling.set()
    results["second"] = converted_once(source, tmp_path / "cache", ".x", lambda out: builds.append("second"))
    thread.join(60)
    assert builds == ["first"]
    assert results["second"] == results["first"] and results["second"].read_text() == "converted"
