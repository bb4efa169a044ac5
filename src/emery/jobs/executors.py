"""Where a job's rollouts run (``[runtime] executor``): in its own process (``local``) or
on ``emery runner`` processes through the store's queue (``runners``)."""

from __future__ import annotations

from emery.algorithms.base import SearchContext
from emery.config.schema import RuntimeConfig
from emery.core.errors import ConfigError
from emery.evaluation.queue import QueueEvaluator
from emery.store.protocol import Store


def check_executor(runtime: RuntimeConfig, store: Store, *, in_process_inputs: bool) -> None:
    """Refuse an executor this job cannot use, in one line (ConfigError)."""
    if runtime.executor == "local":
        return
    if in_process_inputs:
        raise ConfigError(
            f"executor = {runtime.executor!r} runs rollouts in other processes, which rebuild"
            " the job from its config: create the job from a config, not Python objects"
        )
    if store.url.startswith("memory"):
        raise ConfigError(
            f"executor = {runtime.executor!r} needs a store other processes can open"
            " (a SQLite file or PostgreSQL), not memory://"
        )


def use_executor(ctx: SearchContext, runtime: RuntimeConfig, *, store: Store, job_id: str) -> None:
    """Swap the context's evaluator for the configured executor's (``local``: kept)."""
    if runtime.executor == "local":
        return
    service = ctx.evaluations
    service.evaluator = QueueEvaluator(
        service.evaluator, store, job_id=job_id, lease_s=runtime.lease_s
    )
