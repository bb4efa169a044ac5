"""Where a job's rollouts run (``[runtime] executor``): in its own process (``local``), on
``emery runner`` processes through the store's queue (``runners``) or as Ray tasks
(``ray``). Remote workers rebuild the job from its stored config."""

from __future__ import annotations

import os
import socket
from functools import partial

from emery.algorithms.base import SearchContext
from emery.config.schema import RuntimeConfig
from emery.core.errors import ConfigError
from emery.evaluation.evaluator import Evaluator
from emery.evaluation.queue import QueueEvaluator
from emery.evaluation.ray_executor import RayEvaluator
from emery.evaluation.ray_worker import import_ray
from emery.jobs.runner_work import build_job_work
from emery.store.backends import open_store
from emery.store.protocol import Store


def check_executor(runtime: RuntimeConfig, store: Store, *, in_process_inputs: bool) -> None:
    """Refuse an executor this job cannot use, in one line (ConfigError)."""
    if runtime.executor == "local":
        return
    if runtime.executor == "ray":
        import_ray()
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
    meter = service.budget.meter  # runs elsewhere are charged as local ones
    if runtime.executor == "runners":
        service.evaluator = QueueEvaluator(
            service.evaluator,
            store,
            job_id=job_id,
            lease_s=runtime.lease_s,
            meter=meter,
            runner_wait_s=runtime.runner_wait_s,
        )
        return
    service.evaluator = RayEvaluator(
        service.evaluator,
        store,
        key=f"{store.url}#{job_id}",
        build=partial(build_ray_evaluator, store.url, job_id),
        meter=meter,
        address=runtime.ray_address,
        num_cpus=runtime.ray_cpus,
        actors=runtime.ray_actors,
    )


def build_ray_evaluator(store_url: str, job_id: str) -> Evaluator:
    """A Ray worker's evaluator for a job: rebuilt from its config, recording to its store."""
    store = open_store(store_url)
    worker = f"ray:{socket.gethostname()}:{os.getpid()}"
    return build_job_work(store, job_id, worker, queued=False).evaluator
