"""Canary rollouts end to end in one process (real SQLite, real git, the dict engine, the fake trainer): an
accepted release opens a rollout instead of serving, requests are routed by sticky key, live reports decide,
operators end it by hand, and a restart or a second replica sees the same rollout."""

from __future__ import annotations

import dataclasses
import itertools
import time

import pytest

from reef.application.config import ConfigError, load_settings
from reef.core.errors import BadRequest, Conflict
from reef.core.records import Record
from reef.core.settings import RolloutSettings
from reef.learning.rollout.assignment import arm_of
from tests.fakes.learning_world import QUESTIONS, World, make_settings, open_world

Q = list(QUESTIONS)
S = "math"


def canary_world(root, **rollout) -> World:
    settings = make_settings(root)
    options = {"mode": "canary", "canary_share": 0.5, "check_interval_s": 60.0, **rollout}
    settings = settings.model_copy(update={"rollout": RolloutSettings(**options)})
    return open_world(root, settings)


async def opened(world: World) -> dict:
    """Start the world and run one accepted step: it opens a rollout."""
    await world.runtime.start()
    await world.runtime.ensure_scenario(S)
    for q in Q[:2]:
        world.report(S, q, QUESTIONS[q])
    commit = await world.runtime.step(S)
    assert commit is not None and commit["verdict"] == "published", commit
    return commit


def key_on(world: World, arm: str, start: int = 0) -> str:
    """A session key the open rollout routes to `arm`."""
    rollout_id = world.runtime.rollout(S)["rollout_id"]
    share = world.settings.rollout.canary_share
    return next(f"s{n}" for n in itertools.count(start) if arm_of(f"session:s{n}", rollout_id, share) == arm)


def serve_and_report(world: World, arm: str, score: float, n: int, start: int = 0) -> None:
    """`n` sessions routed to `arm`, each served once (an inference record) and reported with `score`."""
    view = world.runtime.rollout(S)
    for i in range(n):
        session = key_on(world, arm, start + i * 7919)
        ctx, rollout_id = world.runtime.route(S, None, {"session": session})
        served = ctx.release_id or world.engine.active_release_id(S)
        payload = {"release_id": served, "rollout_id": rollout_id, "request": {}, "response": {}}
        (inference,) = world.records.append([Record.new(S, "inference", payload, created_at=time.time())])
        report = {"score": score, "references": [inference.agent_record_id]}
        world.records.append([Record.new(S, "report", report, created_at=time.time())])
    assert view["rollout_id"] == world.runtime.rollout(S)["rollout_id"]


async def test_an_accepted_release_in_canary_mode_opens_a_rollout_and_the_head_stays(tmp_path):
    world = canary_world(tmp_path)
    commit = await opened(world)
    view = world.runtime.rollout(S)
    assert view["state"] == "canary" and view["share"] == 0.5
    assert view["candidate_release_id"] == commit["release_id"]
    releases = {r["release_id"]: r for r in world.releases(S)}
    assert releases[commit["release_id"]]["pending"] and not releases[commit["release_id"]]["current"]
    assert releases[commit["release_id"]]["canary"] and sum(r["canary"] for r in releases.values()) == 1
    assert releases[view["incumbent_release_id"]]["current"]
    assert world.engine.active_release_id(S) == view["incumbent_release_id"]
    assert f"opened rollout {view['rollout_id']}" in commit["reason"]
    await world.runtime.stop()


async def test_requests_are_routed_to_the_arm_of_their_sticky_key_and_pins_keep_their_meaning(tmp_path):
    world = canary_world(tmp_path)
    await opened(world)
    view = world.runtime.rollout(S)
    candidate, incumbent = key_on(world, "candidate"), key_on(world, "incumbent")
    for _ in range(3):
        ctx, rollout_id = world.runtime.route(S, None, {"session": candidate, "user": "u"})
        assert ctx.release_id == view["candidate_release_id"] and ctx.candidate_path is not None
        assert rollout_id == view["rollout_id"]
        ctx, _ = world.runtime.route(S, None, {"session": incumbent})
        assert ctx.release_id is None  # the serving head
    pinned, rollout_id = world.runtime.route(S, view["incumbent_release_id"], {"session": candidate})
    assert rollout_id is None and pinned.candidate_path is None
    await world.runtime.stop()


async def test_a_candidate_the_users_dislike_is_rolled_back_with_its_statistics_in_the_commit_log(tmp_path):
    world = canary_world(tmp_path)
    await opened(world)
    view = world.runtime.rollout(S)
    serve_and_report(world, "candidate", 0.0, 30)
    serve_and_report(world, "incumbent", 1.0, 30, start=1)
    await world.runtime.rollouts.tick()
    ended = world.runtime.rollout(S)
    assert ended["state"] == "rolled_back" and ended["decision"] == "rollback" and ended["decided_by"] == "test"
    assert ended["arms"]["candidate"]["reports"] == 30 and ended["arms"]["incumbent"]["reports"] == 30
    assert ended["arms"]["candidate"]["mean"] == 0.0 and ended["difference"]["interval"][1] < 0
    assert world.engine.active_release_id(S) == view["incumbent_release_id"]
    last = world.commits(S)[-1]
    assert last["verdict"] == "rejected" and last["release_id"] == view["candidate_release_id"]
    assert last["metrics"]["rollout"]["rollout_id"] == view["rollout_id"]
    assert last["metrics"]["rollout"]["arms"]["candidate"]["reports"] == 30
    ctx, rollout_id = world.runtime.route(S, None, {"session": key_on(world, "candidate")})
    assert rollout_id is None and ctx.release_id is None  # everyone on the incumbent again
    await world.runtime.stop()


async def test_a_candidate_the_users_prefer_is_promoted_and_serves_everything(tmp_path):
    world = canary_world(tmp_path)
    await opened(world)
    view = world.runtime.rollout(S)
    serve_and_report(world, "candidate", 1.0, 30)
    serve_and_report(world, "incumbent", 0.0, 30, start=1)
    await world.runtime.rollouts.tick()
    ended = world.runtime.rollout(S)
    assert ended["state"] == "promoted" and ended["decided_by"] == "test"
    head = world.releases(S)[0]
    assert head["current"] and head["operation"] == "promote" and ended["release_id"] == head["release_id"]
    candidate = next(r for r in world.releases(S) if r["release_id"] == view["candidate_release_id"])
    assert head["content_id"] == candidate["content_id"]
    assert world.engine.active_release_id(S) == head["release_id"]
    assert world.commits(S)[-1]["verdict"] == "published"
    await world.runtime.stop()


async def test_a_report_citing_both_arms_counts_for_neither(tmp_path):
    world = canary_world(tmp_path)
    await opened(world)
    rollout_id = world.runtime.rollout(S)["rollout_id"]
    cited = []
    for arm in ("candidate", "incumbent"):
        ctx, _ = world.runtime.route(S, None, {"session": key_on(world, arm)})
        served = ctx.release_id or world.engine.active_release_id(S)
        payload = {"release_id": served, "rollout_id": rollout_id, "request": {}, "response": {}}
        cited.append(world.records.append([Record.new(S, "inference", payload, created_at=time.time())])[0])
    both = {"score": 1.0, "references": [r.agent_record_id for r in cited]}
    one = {"score": 0.5, "references": [cited[0].agent_record_id]}
    world.records.append([Record.new(S, "report", body, created_at=time.time()) for body in (both, one)])
    await world.runtime.rollouts.tick()
    arms = world.runtime.rollout(S)["arms"]
    assert arms["candidate"]["requests"] == 1 and arms["incumbent"]["requests"] == 1
    assert arms["candidate"]["reports"] == 1 and arms["candidate"]["mean"] == 0.5
    assert arms["incumbent"]["reports"] == 0
    await world.runtime.stop()


async def test_a_canary_failing_clearly_more_often_is_rolled_back_at_once(tmp_path):
    world = canary_world(tmp_path)
    await opened(world)
    rollout_id = world.runtime.rollout(S)["rollout_id"]
    serve_and_report(world, "incumbent", 1.0, 20)
    ctx, _ = world.runtime.route(S, None, {"session": key_on(world, "candidate")})
    for _ in range(20):
        await world.runtime.request_failed(S, rollout_id, ctx)
    await world.runtime.rollouts.tick()
    ended = world.runtime.rollout(S)
    assert ended["state"] == "rolled_back" and ended["decided_by"] == "errors"
    assert ended["arms"]["candidate"]["errors"] == 20
    await world.runtime.stop()


async def test_while_a_rollout_is_open_release_moves_and_requested_steps_are_refused_naming_it(tmp_path):
    world = canary_world(tmp_path)
    await opened(world)
    view = world.runtime.rollout(S)
    before = world.releases(S)
    for attempt in (
        world.runtime.rollback(S, view["candidate_release_id"]),
        world.runtime.promote(S, view["candidate_release_id"]),
        world.runtime.request_step(S),
    ):
        with pytest.raises(Conflict, match=view["rollout_id"]):
            await attempt
    assert world.releases(S) == before
    # A later accepted step keeps its candidate as the lineage's tip: nothing else publishes.
    for q in Q[2:4]:
        world.report(S, q, QUESTIONS[q])
    commit = await world.runtime.step(S)
    assert commit is not None and commit["verdict"] == "kept" and view["rollout_id"] in commit["reason"]
    assert len(world.releases(S)) == len(before)
    await world.runtime.stop()


async def test_an_operator_promotes_or_rolls_back_by_hand_and_nothing_open_is_a_conflict(tmp_path):
    world = canary_world(tmp_path)
    await opened(world)
    with pytest.raises(BadRequest) as bad:
        await world.runtime.end_rollout(S, "restart")
    assert bad.value.field == "action"
    assert world.runtime.rollout(S)["state"] == "canary"
    ended = await world.runtime.end_rollout(S, "rollback")
    assert ended["state"] == "rolled_back" and ended["decided_by"] == "operator"
    with pytest.raises(Conflict):
        await world.runtime.end_rollout(S, "promote")
    assert world.runtime.rollout(S)["state"] == "rolled_back"  # the last one stays readable
    await world.runtime.stop()


async def test_a_restart_resumes_the_rollout_where_it_was(tmp_path):
    world = canary_world(tmp_path)
    await opened(world)
    view = world.runtime.rollout(S)
    candidate = key_on(world, "candidate")
    serve_and_report(world, "candidate", 0.0, 5)
    await world.runtime.rollouts.tick()
    await world.runtime.stop()
    world = world.restart()
    await world.runtime.start()
    resumed = world.runtime.rollout(S)
    assert resumed["rollout_id"] == view["rollout_id"] and resumed["state"] == "canary"
    assert resumed["arms"]["candidate"]["reports"] == 5
    ctx, _ = world.runtime.route(S, None, {"session": candidate})
    assert ctx.release_id == view["candidate_release_id"]
    serve_and_report(world, "candidate", 0.0, 25, start=5)
    serve_and_report(world, "incumbent", 1.0, 30, start=6)
    await world.runtime.rollouts.tick()
    ended = world.runtime.rollout(S)
    assert ended["state"] == "rolled_back" and ended["arms"]["candidate"]["reports"] == 30
    await world.runtime.stop()


async def test_two_replicas_route_a_key_to_the_same_arm_and_see_the_same_decision(tmp_path):
    world = canary_world(tmp_path)
    await opened(world)
    other = open_world(tmp_path, world.settings)  # a second replica on the same stores
    await other.runtime.rollouts.sync()
    for n in range(50):
        mine, _ = world.runtime.route(S, None, {"user": f"u{n}"})
        theirs, _ = other.runtime.route(S, None, {"user": f"u{n}"})
        assert mine.release_id == theirs.release_id
    await world.runtime.end_rollout(S, "rollback")
    assert other.runtime.rollouts.view(S)["state"] == "rolled_back"
    await other.runtime.rollouts.sync()
    assert other.runtime.rollouts.open_on(S) is None
    await world.runtime.stop()


async def test_a_rollout_mode_set_per_scenario_turns_canary_on_and_a_bad_one_is_refused(tmp_path):
    world = open_world(tmp_path, make_settings(tmp_path))
    await world.runtime.start()
    await world.runtime.ensure_scenario(S)
    assert world.runtime.rollouts.mode(S) == "immediate"
    updated = await world.runtime.update_control(S, rollout_mode="canary")
    assert updated["rollout_mode"] == "canary"
    for q in Q[:2]:
        world.report(S, q, QUESTIONS[q])
    await world.runtime.step(S)
    assert world.runtime.rollout(S)["state"] == "canary"
    await world.runtime.stop()


def test_canary_on_an_engine_that_serves_one_model_whatever_the_release_is_refused_naming_rollout_mode(tmp_path):
    settings = make_settings(tmp_path)
    inference = settings.inference.model_copy(update={"backend": "upstream", "upstream_url": "http://x"})
    settings = settings.model_copy(update={"inference": inference, "rollout": RolloutSettings(mode="canary")})
    with pytest.raises(ConfigError, match=r"^rollout\.mode: "):
        open_world(tmp_path, settings)


@pytest.mark.parametrize("share", ["0", "1", "1.5", "-0.1"])
def test_a_canary_share_outside_zero_one_is_refused_naming_it(share):
    with pytest.raises(ConfigError, match=r"rollout\.canary_share"):
        load_settings(None, {("rollout", "canary_share"): share})


async def test_a_release_pending_review_opens_its_canary_when_promoted(tmp_path):
    settings = make_settings(tmp_path, review=True)
    settings = settings.model_copy(update={"rollout": RolloutSettings(mode="canary", check_interval_s=60.0)})
    world = open_world(tmp_path, settings)
    await world.runtime.start()
    await world.runtime.ensure_scenario(S)
    for q in Q[:2]:
        world.report(S, q, QUESTIONS[q])
    commit = await world.runtime.step(S)
    assert commit is not None and commit["verdict"] == "pending"
    assert world.runtime.rollout(S)["state"] == "none"  # review first: no canary yet
    head = world.releases(S)[-1]["release_id"]
    promoted = await world.runtime.promote(S, commit["release_id"])
    view = world.runtime.rollout(S)
    assert promoted.pending and view["state"] == "canary"
    assert view["candidate_release_id"] == commit["release_id"] and view["incumbent_release_id"] == head
    assert world.engine.active_release_id(S) == head
    await world.runtime.stop()


def test_an_undecided_rollout_ends_with_on_timeout_at_its_report_or_time_limit():
    from reef.learning.rollout.policy import ending
    from reef.learning.rollout.sequential import Tally
    from reef.learning.rollout.state import ArmStats, Rollout

    rollout = Rollout.open(S, "c", "i", 0.5, 0.05, cursor=0)
    even = {arm: ArmStats(requests=10, scores=Tally(10, 5.0)) for arm in ("candidate", "incumbent")}
    rollout = dataclasses.replace(rollout, arms=even)
    config = RolloutSettings(max_reports=20, on_timeout="rollback")
    end = ending(rollout, config, now=rollout.started_at)
    assert end is not None and end.decision == "rollback" and end.decided_by == "timeout"
    assert "rollout.max_reports" in end.reason
    patient = RolloutSettings(max_reports=1000, max_duration_s=60)
    assert ending(rollout, patient, now=rollout.started_at + 59) is None
    end = ending(rollout, patient, now=rollout.started_at + 61)
    assert end is not None and end.decision == "promote" and "rollout.max_duration_s" in end.reason


async def test_a_promotion_cut_short_after_its_decision_is_finished_by_the_next_round(tmp_path):
    world = canary_world(tmp_path)
    await opened(world)
    view = world.runtime.rollout(S)
    row = world.records.rollout(S)
    assert row.document is not None
    decided = {**row.document, "state": "promoted", "decision": "promote", "decided_by": "test", "release_id": None}
    assert world.records.put_rollout(S, decided, row.version)  # the process "died" before moving the head
    await world.runtime.stop()
    world = world.restart()
    await world.runtime.start()
    await world.runtime.rollouts.tick()
    ended = world.runtime.rollout(S)
    head = world.releases(S)[0]
    assert head["current"] and head["operation"] == "promote" and ended["release_id"] == head["release_id"]
    assert world.engine.active_release_id(S) == head["release_id"]
    assert world.commits(S)[-1]["metrics"]["rollout"]["rollout_id"] == view["rollout_id"]
    await world.runtime.stop()
