"""The ``ray`` executor: each rollout of a batch is a Ray task.

A task runs on a Ray worker process with an ``Evaluator`` that ``build`` (a picklable
function, e.g. one that rebuilds the job from its stored config) makes once per worker
process and key, so a system with setup cost (a loaded model, a harness pool) pays it once
per worker, not per rollout. Rollouts, attempts and spans go to the job's store from the
worker; the result comes back to the job. A worker lost mid-rollout (its process died) is
retried by Ray up to ``max_retries`` times. Cancelling the batch (a pause or cancel of the
job) cancels its Ray tasks. Ray is imported only here, and only when this executor runs.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from typing import Any

from emery.core.errors import ConfigError
from emery.core.models import Candidate, Example, Split
from emery.evaluation.evaluator import Evaluator
from emery.evaluation.results import EvalResult, ExampleResult

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


def run_rollout(
    key: str, build: Build, candidate: dict[str, Any], example: dict[str, Any], split: str | None
) -> dict[str, Any]:
    """The body of a Ray task: one rollout with this process's evaluator for ``key``."""
    with _built_lock:
        if key not in _built:
            _built[key] = (build(), asyncio.new_event_loop())
        evaluator, loop = _built[key]
    result = loop.run_until_complete(
        evaluator.run_one(
            Candidate.model_validate(candidate),
            Example.model_validate(example),
            split,  # type: ignore[arg-type]
        )
    )
    return result.model_dump(mode="json")


class RayEvaluator(Evaluator):
    """An ``Evaluator`` whose batches run as Ray tasks (``run_one`` stays in-process)."""

    def __init__(
        self,
        base: Evaluator,
        *,
        key: str,
        build: Build,
        address: str | None = None,
        num_cpus: int | None = None,
        max_retries: int = 0,
    ) -> None:
        super().__init__(**base.settings())
        self.key = key
        self.build = build
        self.address = address
        self.num_cpus = num_cpus
        self.max_retries = max_retries
        self._task: Any = None

    def _remote(self) -> Any:
        ray = start_ray(self.address, self.num_cpus)
        if self._task is None:
            self._task = ray.remote(max_retries=self.max_retries, num_cpus=1)(run_rollout)
        return self._task

    async def evaluate(
        self,
        candidate: Candidate,
        examples: Sequence[Example],
        split: Split | None = None,
        *,
        on_result: Callable[[ExampleResult], None] | None = None,
    ) -> EvalResult:
        """Run ``examples`` as Ray tasks; results in example order, ``on_result`` as each
        comes back. A cancel cancels every task of the batch still running."""
        if not examples:
            return EvalResult(candidate_id=candidate.id, split=split, results=[])
        ray = import_ray()
        task = self._remote()
        payload = candidate.model_dump(mode="json")
        refs = [
            task.remote(self.key, self.build, payload, example.model_dump(mode="json"), split)
            for example in examples
        ]
        results: list[ExampleResult | None] = [None] * len(examples)

        async def collect(index: int, ref: Any) -> None:
            result = ExampleResult.model_validate(await ref)
            results[index] = result
            if on_result is not None:
                on_result(result)

        waits = [asyncio.ensure_future(collect(i, ref)) for i, ref in enumerate(refs)]
        try:
            await asyncio.gather(*waits)
        except BaseException:
            for ref in refs:
                ray.cancel(ref, force=True)
            for wait in waits:
                wait.cancel()
            raise
        done = [result for result in results if result is not None]
        return EvalResult(candidate_id=candidate.id, split=split, results=done)
