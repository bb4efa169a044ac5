"""Jobs: durable optimization and evaluation runs with events, checkpoints and control."""

from __future__ import annotations

from typing import TYPE_CHECKING

from emery.core.lazy import lazy_exports

if TYPE_CHECKING:
    from emery.jobs.engine import JobEngine
    from emery.jobs.evaluate import EvaluationReport, evaluate_config
    from emery.jobs.manage import (
        cancel_job,
        create_job,
        follow_events,
        pause_job,
        run_job,
        spawn_job_process,
        wait_for,
    )
    from emery.jobs.ownership import JobBusy

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "JobBusy": "emery.jobs.ownership",
        "JobEngine": "emery.jobs.engine",
        "EvaluationReport": "emery.jobs.evaluate",
        "evaluate_config": "emery.jobs.evaluate",
        "cancel_job": "emery.jobs.manage",
        "create_job": "emery.jobs.manage",
        "follow_events": "emery.jobs.manage",
        "pause_job": "emery.jobs.manage",
        "run_job": "emery.jobs.manage",
        "spawn_job_process": "emery.jobs.manage",
        "wait_for": "emery.jobs.manage",
    },
)

__all__ = [
    "EvaluationReport",
    "JobBusy",
    "JobEngine",
    "cancel_job",
    "create_job",
    "evaluate_config",
    "follow_events",
    "pause_job",
    "run_job",
    "spawn_job_process",
    "wait_for",
]
