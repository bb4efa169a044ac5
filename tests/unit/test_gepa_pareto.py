"""GEPA's per-example Pareto front, dominance, parent selectors and minibatch sampling."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from emery.algorithms.gepa.batches import next_minibatch
from emery.algorithms.gepa.pareto import front_weights, non_dominated, per_example_front
from emery.algorithms.gepa.selection import select_components, select_parent
from emery.algorithms.gepa.state import GepaState, PoolEntry, SamplerState
from emery.core.models import Candidate

SCORES = {
    "seed": {"e1": 0.0, "e2": 0.0, "e3": 0.0, "e4": 1.0},
    "a": {"e1": 1.0, "e2": 1.0, "e3": 0.0, "e4": 0.0},
    "b": {"e1": 0.0, "e2": 1.0, "e3": 1.0, "e4": 1.0},
    "c": {"e1": 0.0, "e2": 0.5, "e3": 1.0, "e4": 0.0},
}


def mean(scores: dict[str, float]) -> float:
    return sum(scores.values()) / len(scores)


def state_of(scores: dict[str, dict[str, float]]) -> GepaState:
    pool = [
        PoolEntry(
            candidate=Candidate(components={"x": name}),
            val_scores=table,
            val_score=mean(table),
        )
        for name, table in scores.items()
    ]
    ids = {name: entry.id for name, entry in zip(scores, pool, strict=True)}
    state = GepaState(pool=pool, seed_candidate_id=ids["seed"])
    state.front = per_example_front(state.val_table(), [entry.id for entry in pool])
    return state


def test_front_holds_every_candidate_tied_for_the_best_score_per_example() -> None:
    front = per_example_front(SCORES)
    assert front == {"e1": ["a"], "e2": ["a", "b"], "e3": ["b", "c"], "e4": ["seed", "b"]}


def test_dominated_candidates_are_removed_lowest_mean_first() -> None:
    front = per_example_front(SCORES)
    means = {name: mean(table) for name, table in SCORES.items()}
    # seed is best only on e4, where b is best too; c only on e3, where b is too.
    assert non_dominated(front, means) == ["a", "b"]
    assert front_weights(front, means) == {"a": 2, "b": 3}


def test_removal_keeps_one_of_two_identical_candidates() -> None:
    front = per_example_front({"x": {"e1": 1.0}, "y": {"e1": 1.0}})
    kept = non_dominated(front, {"x": 1.0, "y": 1.0})
    assert len(kept) == 1


def test_all_zero_scores_leave_a_single_parent() -> None:
    table = {"seed": {"e1": 0.0, "e2": 0.0}, "a": {"e1": 0.0, "e2": 0.0}}
    front = per_example_front(table)
    assert front == {"e1": ["seed", "a"], "e2": ["seed", "a"]}
    assert len(front_weights(front, {"seed": 0.0, "a": 0.0})) == 1


def test_pareto_selection_samples_in_proportion_to_examples_won() -> None:
    state = state_of(SCORES)
    rng = random.Random(0)
    draws = Counter(
        select_parent(state, rng, "pareto")[0].candidate.components["x"] for _ in range(6000)
    )
    assert set(draws) == {"a", "b"}
    assert draws["b"] / draws["a"] == pytest.approx(3 / 2, rel=0.08)


def test_current_best_selects_the_highest_mean() -> None:
    state = state_of(SCORES)
    chosen, weights = select_parent(state, random.Random(0), "current_best")
    assert chosen.candidate.components["x"] == "b"
    assert weights == {}


def test_epsilon_greedy_explores_with_probability_epsilon() -> None:
    state = state_of(SCORES)
    rng = random.Random(1)
    draws = Counter(
        select_parent(state, rng, "epsilon_greedy", epsilon=0.2)[0].candidate.components["x"]
        for _ in range(4000)
    )
    # b is chosen greedily 80% of the time and by chance in 1/4 of the other 20%.
    assert draws["b"] / 4000 == pytest.approx(0.85, abs=0.03)
    assert draws["seed"] > 0
    assert draws["c"] > 0


def test_top_k_pareto_only_draws_from_the_k_best_by_mean() -> None:
    state = state_of(SCORES)
    rng = random.Random(2)
    draws = Counter(
        select_parent(state, rng, "top_k_pareto", top_k=2)[0].candidate.components["x"]
        for _ in range(500)
    )
    # The two best by mean are b (0.75) and a (0.5); seed and c never appear.
    assert set(draws) == {"a", "b"}


def test_round_robin_is_kept_per_candidate() -> None:
    entry = PoolEntry(candidate=Candidate(components={"p": "1", "q": "2", "r": "3"}))
    names = ["p", "q", "r"]
    picks = [select_components(entry, names, "round_robin")[0] for _ in range(4)]
    assert picks == ["p", "q", "r", "p"]
    assert select_components(entry, names, "all") == names


def test_minibatches_cover_every_train_example_once_per_epoch() -> None:
    ids = [f"t{i}" for i in range(7)]
    sampler = SamplerState()
    rng = random.Random(0)
    batches = [next_minibatch(sampler, ids, 3, rng) for _ in range(3)]
    assert all(len(batch) == 3 and len(set(batch)) == 3 for batch in batches)
    seen = Counter(example for batch in batches for example in batch)
    assert set(seen) == set(ids)
    assert sorted(seen.values()) == [1, 1, 1, 1, 1, 2, 2]  # padded with two least-used ids
    assert sampler.epoch == 0
    next_minibatch(sampler, ids, 3, rng)
    assert sampler.epoch == 1
    # Padding prefers ids used least so far.
    assert max(sampler.counts.values()) - min(sampler.counts.values()) <= 1


def test_minibatch_is_whole_train_when_train_is_small() -> None:
    sampler = SamplerState()
    batch = next_minibatch(sampler, ["a", "b"], 3, random.Random(0))
    assert sorted(batch) == ["a", "b"]


def test_sampler_state_round_trips_through_json() -> None:
    ids = [f"t{i}" for i in range(5)]
    first, rng_a = SamplerState(), random.Random(3)
    next_minibatch(first, ids, 2, rng_a)
    copy = SamplerState.model_validate_json(first.model_dump_json())
    rng_b = random.Random()
    rng_b.setstate(rng_a.getstate())
    assert next_minibatch(first, ids, 2, rng_a) == next_minibatch(copy, ids, 2, rng_b)
