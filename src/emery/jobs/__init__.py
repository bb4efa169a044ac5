"""Jobs: durable optimization and evaluation runs with events, checkpoints and control."""

from emery.jobs.engine import JobBusy, JobEngine
from emery.jobs.evaluate import EvaluationReport, evaluate_config
from emery.jobs.manage import (
    cancel_job,
    create_job,
    follow_events,
    pause_job,
    run_job,
    spawn_worker,
    wait_for,
)
from emery.jobs.report import render_report
from emery.jobs.results import CandidateSummary, JobResult, build_result
from emery.jobs.runtime import JobInputs
from emery.jobs.sdk import Job, optimize

__all__ = [
    "CandidateSummary",
    "EvaluationReport",
    "Job",
    "JobBusy",
    "JobEngine",
    "JobInputs",
    "JobResult",
    "build_result",
    "cancel_job",
    "create_job",
    "evaluate_config",
    "follow_events",
    "optimize",
    "pause_job",
    "render_report",
    "run_job",
    "spawn_worker",
    "wait_for",
]
