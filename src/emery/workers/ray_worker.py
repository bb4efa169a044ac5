"""Ray itself, and what runs on Ray workers: the body of a rollout task and the rollout actor.

Ray is imported only here, and only when a ``ray`` executor runs. A worker process (or an
actor) runs rollouts with an ``Evaluator`` that ``build`` (a picklable function, e.g. one
that rebuilds the job from its stored config) makes once per process and key (or once per
actor), so a system with setup cost pays it once, not per rollout.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

from emery.core.errors import ConfigError
from emery.core.models import Candidate, Example, Split
from emery.core.rollouts import Rollout
from emery.evaluation.evaluator import Evaluator

Build = Callable[[], Evaluator]

_built: dict[str, tuple[Evaluator, asyncio.AbstractEventLoop]] = {}
_built_lock = threading.Lock()
_init_lock = threading.Lock()


def import_ray() -> Any:
    """The ``ray`` module, or a one-line ConfigError saying how to install it."""
    try:
        import ray  # an optional dependency
    except ImportError:
        raise ConfigError("executor = 'ray' needs Ray: pip install 'emery[ray]'") from None
    return ray


def start_ray(address: str | None, num_cpus: int | None) -> Any:
    """Join the Ray cluster at ``address``, or start a local one (``num_cpus`` CPUs) once
    per process."""
    ray = import_ray()
    with _init_lock:
        if not ray.is_initialized():
            if address is not None:
                ray.init(address=address, log_to_driver=False)
            else:
                # its worker processes inherit this process's environment (PYTHONPATH...)
                ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
    return ray


async def run_on(
    evaluator: Evaluator,
    candidate: dict[str, Any],
    example: dict[str, Any],
    split: str | None,
    rollout: dict[str, Any],
) -> dict[str, Any]:
    """Run ``rollout`` (from its next attempt on) with ``evaluator``; the result as JSON."""
    result = await evaluator.run_one(
        Candidate.model_validate(candidate),
        Example.model_validate(example),
        split if split in ("train", "val", "test") else None,  # type: ignore[arg-type]
        rollout=Rollout.model_validate(rollout),
    )
    return result.model_dump(mode="json")


def run_rollout(
    key: str,
    build: Build,
    candidate: dict[str, Any],
    example: dict[str, Any],
    split: Split | None,
    rollout: dict[str, Any],
) -> dict[str, Any]:
    """The body of a Ray task: one rollout with this process's evaluator for ``key``."""
    with _built_lock:
        if key not in _built:
            _built[key] = (build(), asyncio.new_event_loop())
        evaluator, loop = _built[key]
    return loop.run_until_complete(run_on(evaluator, candidate, example, split, rollout))


class RolloutActor:
    """The body of a Ray actor: builds its evaluator once, then runs rollouts on it. Its
    method is async, so cancelling a call cancels the rollout (an attempt ``cancelled``)."""

    def __init__(self, build: Build) -> None:
        self.evaluator = build()

    async def run(
        self,
        candidate: dict[str, Any],
        example: dict[str, Any],
        split: Split | None,
        rollout: dict[str, Any],
    ) -> dict[str, Any]:
        return await run_on(self.evaluator, candidate, example, split, rollout)
