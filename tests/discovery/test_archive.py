"""The PUCT archive: selection, visits and Q backed up, bounded size, idempotent steps, a JSON round trip."""

from __future__ import annotations

import json

from reef.discovery.archive import Archive, Attempt


def _archive(**settings: object) -> Archive:
    return Archive.seeded([("[1]", 1.0, 1.0, True, "seed")], **settings)  # type: ignore[arg-type]


def _attempt(parent: str, group: int, rollout: int, reward: float, valid: bool = True) -> Attempt:
    return Attempt(parent, group, rollout, f"[{reward}]" if valid else None, reward if valid else None, reward, valid)


def test_a_fresh_archive_offers_its_seed_for_every_group() -> None:
    parents = _archive().select(3)
    assert [p.entry_id for p in parents] == ["seed-0", "seed-0", "seed-0"]


def test_a_step_keeps_at_most_two_valid_children_per_parent_the_best_ones() -> None:
    archive = _archive()
    attempts = [_attempt("seed-0", 0, r, reward) for r, reward in enumerate([0.5, 2.0, 1.5, 3.0])]
    assert archive.record(1, attempts + [_attempt("seed-0", 0, 4, 0.0, valid=False)])
    children = sorted(e.entry_id for e in archive.entries.values() if e.parent_id == "seed-0")
    assert children == ["s1-g0-r1", "s1-g0-r3"]


def test_visits_are_backed_up_to_every_ancestor_and_q_is_the_best_descendant() -> None:
    archive = _archive()
    archive.record(1, [_attempt("seed-0", 0, 0, 2.0)])
    archive.record(2, [_attempt("s1-g0-r0", 0, r, 5.0 - r) for r in range(3)])
    seed, child = archive.entries["seed-0"], archive.entries["s1-g0-r0"]
    assert (seed.visits, child.visits, archive.total_visits) == (4, 3, 4)
    assert seed.q == 5.0 and child.q == 5.0 and seed.reward == 1.0


def test_invalid_attempts_count_as_visits_but_are_not_kept() -> None:
    archive = _archive()
    archive.record(1, [_attempt("seed-0", 0, r, 0.0, valid=False) for r in range(4)])
    assert list(archive.entries) == ["seed-0"] and archive.entries["seed-0"].visits == 4


def test_a_step_already_recorded_changes_nothing() -> None:
    archive = _archive()
    archive.record(1, [_attempt("seed-0", 0, 0, 2.0)])
    before = json.dumps(archive.to_json())
    assert not archive.record(1, [_attempt("seed-0", 0, 1, 9.0)])
    assert json.dumps(archive.to_json()) == before


def test_selection_prefers_a_better_unvisited_entry_and_explores_past_a_visited_one() -> None:
    archive = _archive(exploration=1.0)
    archive.record(1, [_attempt("seed-0", 0, 0, 3.0), _attempt("seed-0", 0, 1, 2.0)])
    assert archive.select(1)[0].entry_id == "s1-g0-r0"
    archive.entries["s1-g0-r0"].visits = 10_000  # heavily visited: the exploration term moves on
    archive.total_visits = 10_000
    assert archive.select(1)[0].entry_id != "s1-g0-r0"


def test_parents_of_one_step_avoid_ancestor_and_descendant_pairs_while_others_remain() -> None:
    archive = _archive()
    archive.record(1, [_attempt("seed-0", 0, 0, 3.0), _attempt("seed-0", 0, 1, 2.0)])
    archive.record(2, [_attempt("s1-g0-r0", 0, 0, 4.0)])
    parents = [p.entry_id for p in archive.select(2)]
    assert len(set(parents)) == 2
    assert not ({"s2-g0-r0", "s1-g0-r0"} <= set(parents))


def test_the_archive_is_bounded_and_always_keeps_its_seeds() -> None:
    archive = _archive(max_entries=3)
    for step in range(1, 6):
        parent = archive.best().entry_id
        archive.record(step, [_attempt(parent, 0, 0, 0.1 * step), _attempt(parent, 0, 1, 0.05)])
    assert len(archive.entries) == 3 and "seed-0" in archive.entries
    assert archive.best().entry_id == "seed-0"  # rewards below the seed's 1.0 never displace it


def test_the_archive_round_trips_through_json() -> None:
    archive = _archive()
    archive.record(1, [_attempt("seed-0", 0, 0, 2.0), _attempt("seed-0", 1, 0, 0.0, valid=False)])
    again = Archive.from_json(json.loads(json.dumps(archive.to_json())))
    assert again.to_json() == archive.to_json()
    assert [e.entry_id for e in again.select(2)] == [e.entry_id for e in archive.select(2)]
