"""One status machine for rollouts and attempts: the core models and the store allow and
refuse the same moves."""

from __future__ import annotations

from typing import get_args

import pytest

from emery.core.errors import IllegalTransition
from emery.core.rollouts import (
    ATTEMPT_TRANSITIONS,
    ROLLOUT_TRANSITIONS,
    Attempt,
    AttemptStatus,
    Rollout,
    RolloutStatus,
)
from emery.store import MemoryStore


def test_rollouts_move_alike_in_memory_and_in_the_store() -> None:
    store = MemoryStore()
    for current in get_args(RolloutStatus):
        for target in get_args(RolloutStatus):
            allowed = target == current or target in ROLLOUT_TRANSITIONS[current]
            rollout = Rollout(id=f"ro-{current}-{target}", status=current)
            store.add_rollouts([rollout])
            if allowed:
                rollout.move(target)
                assert store.update_rollout(rollout.id, status=target).status == target
            else:
                with pytest.raises(IllegalTransition):
                    rollout.move(target)
                with pytest.raises(IllegalTransition):
                    store.update_rollout(rollout.id, status=target)


def test_attempts_move_alike_in_memory_and_in_the_store() -> None:
    store = MemoryStore()
    for number, current in enumerate(get_args(AttemptStatus), start=1):
        for target in get_args(AttemptStatus):
            allowed = target == current or target in ATTEMPT_TRANSITIONS[current]
            attempt = Attempt(rollout_id=f"ro-{target}", number=number, status=current)
            store.add_attempt(attempt)
            if allowed:
                attempt.move(target)
                assert store.update_attempt(attempt.id, status=target).status == target
            else:
                with pytest.raises(IllegalTransition):
                    attempt.move(target)
                with pytest.raises(IllegalTransition):
                    store.update_attempt(attempt.id, status=target)


def test_a_finished_rollout_keeps_its_times() -> None:
    rollout = Rollout(candidate_id="c", example_id="e")
    rollout.move("running")
    assert rollout.started_at is not None
    assert rollout.finished_at is None
    rollout.move("succeeded")
    assert rollout.finished_at is not None
