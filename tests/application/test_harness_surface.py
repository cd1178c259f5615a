"""The harness surface without the HTTP edge: the runtime reads a scenario's harness and queues its proposals, and
who acts as the reviewer decides what a proposal may touch."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from reef.application.runtime import Runtime
from reef.core.errors import BadRequest, Forbidden, NotFound
from reef.core.settings import LearningSettings, Settings, StorageSettings
from tests.fakes.service_app import in_process_edge

RULE = {"op": "create", "node": {"id": "terse", "kind": "rules", "config": {"text": "Be terse."}}}
COMMAND = {"op": "create", "node": {"id": "cmd", "kind": "command", "config": {"name": "cmd", "text": "Run $1."}}}


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    settings = Settings(storage=StorageSettings(dir=tmp_path / "state"), learning=LearningSettings(recipe="evolve"))
    async for _, runtime in in_process_edge(settings, tmp_path):
        yield runtime


async def test_a_recipe_without_a_harness_has_no_harness_surface(tmp_path: Path) -> None:
    settings = Settings(storage=StorageSettings(dir=tmp_path / "state"), learning=LearningSettings(recipe="sft"))
    async for _, runtime in in_process_edge(settings, tmp_path):
        with pytest.raises(NotFound, match="does not evolve a harness"):
            runtime.harness.require_harness()


async def test_a_proposal_creates_its_scenario_and_is_queued(runtime: Runtime) -> None:
    base = await runtime.harness.proposal_base("new", None)
    assert runtime.known_scenario("new")
    queued = await runtime.harness.propose("new", base, {"mutations": [RULE], "reason": "r"}, reviewer=False)
    assert queued["scenario"] == "new" and queued["queued"] is True
    assert [p["proposal_id"] for p in runtime.harness.proposals.pending("new", set())] == [queued["proposal_id"]]


async def test_only_the_reviewer_proposes_a_kind_the_operator_does_not_allow(runtime: Runtime) -> None:
    base = await runtime.harness.proposal_base("s", None)
    body = {"mutations": [COMMAND], "reason": "r"}
    with pytest.raises(Forbidden, match="'cmd' is a command node"):
        await runtime.harness.propose("s", base, body, reviewer=False)
    assert (await runtime.harness.propose("s", base, body, reviewer=True))["queued"]


async def test_a_proposal_names_a_malformed_release_id(runtime: Runtime) -> None:
    with pytest.raises(BadRequest, match="must be a release id"):
        await runtime.harness.proposal_base("s", 5)


async def test_the_view_and_the_installer_name_the_release_they_serve(runtime: Runtime) -> None:
    await runtime.ensure_scenario("s")
    release = await runtime.harness.release("s", None)
    view = await runtime.harness.view(release, runtime.harness.adapter())
    assert view["release_id"] == release.release_id and view["adapter"] == runtime.settings.harness.default_adapter
    installer = await runtime.harness.installer("s", release, "pi")
    assert installer.release_id == release.release_id and installer.script.startswith("#!/bin/sh")
    rows = await runtime.harness.releases("s", reviewer=False)
    assert [row["artifact_version"] for row in rows] == [release.release_id]
