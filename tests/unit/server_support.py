"""A store holding a finished scripted job, and a test client of ``emery server`` over it.

Imported as ``server_support`` (``tests/unit`` is on ``sys.path``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jobs_support as js
import pytest
from fastapi.testclient import TestClient

from emery.algorithms import registry
from emery.algorithms.mipro.events import MiproPlanned
from emery.config import parse_config
from emery.core.events import Event
from emery.jobs import create_job, run_job
from emery.server.api import create_server_app
from emery.server.launcher import ThreadLauncher
from emery.store import MemoryStore


@dataclass
class Served:
    store: MemoryStore
    client: TestClient
    launcher: ThreadLauncher
    job_id: str
    workdir: Path


def job_config(workdir: Path, iterations: int = 3) -> dict[str, Any]:
    """A random-search job on the word problems, run by the scripted fake models."""
    return js.search_config(workdir / ".emery", iterations=iterations)


def finished_job(store: MemoryStore, workdir: Path, iterations: int = 3) -> str:
    config = job_config(workdir, iterations)
    job = create_job(store, parse_config(config), given=config, base_dir=workdir)
    record = run_job(store, job.id)
    assert record.state == "succeeded", record.error
    return job.id


PLAN_SUMMARY = "mipro plan (light): 6 instructions x 4 demo sets per stage, 12 trials"


def plan_event() -> Event:
    """A ``mipro.plan`` event as MIPRO records it at the start of a run."""
    return Event.of(
        MiproPlanned(
            preset="light",
            num_instructions=6,
            num_demo_sets=4,
            num_trials=12,
            minibatch_size=8,
            full_eval_every=4,
            tpe_startup_trials=4,
            bootstrap_examples=8,
            summary_calls=1,
            proposal_attempts=6,
            metric_calls={"trials": 96, "total": 130},
            lm_calls={"task": 138, "proposer": 7, "total": 145},
            budget_metric_calls=200,
            notes=["trials raised to spend the budget"],
            summary=PLAN_SUMMARY,
        )
    )


@pytest.fixture(scope="module")
def random_search_module() -> Iterator[None]:
    """``random_search`` registered for every test of a module."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(registry.ALGORITHM_MODULES, "random_search", "jobs_support")
        yield


@pytest.fixture(scope="module")
def served(
    random_search_module: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    """One finished job in a memory store, served without an API key."""
    workdir = tmp_path_factory.mktemp("served")
    store = MemoryStore()
    job_id = finished_job(store, workdir)
    launcher = ThreadLauncher()
    app = create_server_app(store, launcher=launcher, base_dir=workdir, allow_code=True)
    with TestClient(app) as client:
        yield Served(store, client, launcher, job_id, workdir)
    launcher.join()
