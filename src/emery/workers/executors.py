"""Where a job's rollouts run (``[runtime] executor``), looked up in ``EXECUTORS``
(``core/plugins.py``): a built-in name, in its own process (``local``), on ``emery runner``
processes through the store's queue (``runners``) or as Ray tasks (``ray``); or an
``ExecutorKind`` named as ``"module:attr"`` or by an entry point of the ``emery.executors``
group. Remote workers rebuild the job from its stored config. The executor is built
before the job's search context and given to it complete.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from emery.config.schema import RuntimeConfig
from emery.core.errors import ConfigError
from emery.core.plugins import PluginRegistry
from emery.evaluation.evaluator import Evaluator
from emery.evaluation.executor import Executor, LocalExecutor
from emery.lm.usage import UsageMeter
from emery.store.backends import open_store
from emery.store.protocol import Store
from emery.workers.queue_executor import QueueExecutor
from emery.workers.ray_executor import RayExecutor
from emery.workers.ray_worker import import_ray
from emery.workers.runner import build_job_work


@dataclass(frozen=True)
class ExecutorSetup:
    """What building a job's executor may use; ``meter`` is the job's, so runs made
    elsewhere are charged as local ones."""

    runtime: RuntimeConfig
    store: Store
    job_id: str
    meter: UsageMeter


@dataclass(frozen=True)
class ExecutorKind:
    """One ``[runtime] executor`` value: how its executor is built, and whether its
    rollouts run in other processes (``elsewhere``: they rebuild the job from its stored
    config, so the job must come from a config and live in a store they can open);
    ``available`` raises a one-line ``ConfigError`` when it cannot run here."""

    build: Callable[[ExecutorSetup], Executor]
    elsewhere: bool = True
    available: Callable[[], object] | None = None


def local_executor(setup: ExecutorSetup) -> Executor:
    """Rollouts in the job's own process."""
    return LocalExecutor()


def runners_executor(setup: ExecutorSetup) -> Executor:
    """Rollouts queued in the store for ``emery runner`` processes."""
    runtime = setup.runtime
    return QueueExecutor(
        setup.store,
        job_id=setup.job_id,
        lease_s=runtime.lease_s,
        meter=setup.meter,
        runner_wait_s=runtime.runner_wait_s,
    )


def ray_executor(setup: ExecutorSetup) -> Executor:
    """Rollouts as Ray tasks (or on a pool of Ray actors)."""
    store, runtime = setup.store, setup.runtime
    return RayExecutor(
        store,
        key=f"{store.url}#{setup.job_id}",
        build=partial(build_ray_evaluator, store.url, setup.job_id),
        meter=setup.meter,
        address=runtime.ray_address,
        num_cpus=runtime.ray_cpus,
        actors=runtime.ray_actors,
    )


LOCAL = ExecutorKind(local_executor, elsewhere=False)
RUNNERS = ExecutorKind(runners_executor)
RAY = ExecutorKind(ray_executor, available=import_ray)

EXECUTORS = PluginRegistry(
    what="executor",
    plural="executors",
    where="runtime.executor",
    builtins={
        "local": "emery.workers.executors:LOCAL",
        "runners": "emery.workers.executors:RUNNERS",
        "ray": "emery.workers.executors:RAY",
    },
    attribute="EXECUTOR",
    group="emery.executors",
    type=ExecutorKind,
)


def executor_kind(name: str) -> ExecutorKind:
    """The executor ``name`` refers to, or a one-line ConfigError listing the known names."""
    return EXECUTORS.get(name)


def check_executor(runtime: RuntimeConfig, store: Store, *, in_process_inputs: bool) -> None:
    """Refuse an executor this job cannot use, in one line (ConfigError)."""
    kind = executor_kind(runtime.executor)
    if not kind.elsewhere:
        return
    if kind.available is not None:
        kind.available()
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


def build_executor(setup: ExecutorSetup) -> Executor:
    """The configured executor of a job."""
    return executor_kind(setup.runtime.executor).build(setup)


def build_ray_evaluator(store_url: str, job_id: str) -> Evaluator:
    """A Ray worker's evaluator for a job: rebuilt from its config, recording to its store."""
    store = open_store(store_url)
    worker = f"ray:{socket.gethostname()}:{os.getpid()}"
    return build_job_work(store, job_id, worker, queued=False).evaluator
