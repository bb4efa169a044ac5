"""Where a batch's rollouts run: the ``Executor`` strategy the evaluator's batch loop uses.

The ``Evaluator`` owns the one batch loop (a candidate on examples, results in example
order, bounded concurrency, ``on_result`` as each finishes, everything cancelled on an
error or a cancel). It splits a batch into chunks of ``chunk`` examples (``None``: the
whole batch is one chunk) and runs at most ``lanes(concurrency)`` chunks at a time
(``None``: all at once); an executor runs one chunk, telling ``done`` (the index in the
chunk, the result) as each rollout finishes. ``LocalExecutor`` runs each rollout in this
process; the queue (``workers.queue_executor.QueueExecutor``) and Ray (``workers.ray_executor``) run
them elsewhere and charge the model usage they report to the job's meter.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from emery.core.example_result import ExampleResult
from emery.core.models import Candidate, Example, Split
from emery.evaluation.rollouts import RolloutMaker

Done = Callable[[int, ExampleResult], None]


class RolloutHost(Protocol):
    """What an executor may use of the evaluator it runs for: its rollout maker (the
    rollout config, new rollout records) and one rollout run in this process."""

    rollout_maker: RolloutMaker

    @property
    def runner(self) -> RolloutMaker:
        """Deprecated name of ``rollout_maker``, kept for executors written against it; it
        goes in the next release."""
        ...

    async def run_here(
        self, candidate: Candidate, example: Example, split: Split | None
    ) -> ExampleResult: ...


class Executor(Protocol):
    """How one chunk of a batch's rollouts gets run (see the module's docstring)."""

    @property
    def chunk(self) -> int | None:
        """Examples per ``run`` call (``None``: the whole batch in one call)."""
        ...

    def lanes(self, concurrency: int) -> int | None:
        """How many ``run`` calls at a time, given the evaluator's ``concurrency``
        (``None``: every chunk at once)."""
        ...

    async def run(
        self,
        host: RolloutHost,
        candidate: Candidate,
        examples: Sequence[Example],
        split: Split | None,
        done: Done,
    ) -> None:
        """Run ``candidate`` on ``examples``; ``done(index, result)`` as each finishes."""
        ...

    def close(self) -> None:
        """Release what running rollouts holds (a Ray actor pool); most hold nothing."""
        ...


class LocalExecutor:
    """Each rollout in this process, ``concurrency`` at a time (``executor = "local"``)."""

    chunk = 1

    def lanes(self, concurrency: int) -> int:
        return concurrency

    async def run(
        self,
        host: RolloutHost,
        candidate: Candidate,
        examples: Sequence[Example],
        split: Split | None,
        done: Done,
    ) -> None:
        for index, example in enumerate(examples):
            done(index, await host.run_here(candidate, example, split))

    def close(self) -> None:
        """Nothing to release."""
