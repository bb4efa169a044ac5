"""Experiment tracking: a job as an MLflow run (``[tracking] mlflow = true``).

The run gets the job's config as parameters when it is made; its id is stored with the
job (``metadata["mlflow_run_id"]``), so a paused or resumed job goes on logging into the
same run. Metrics come from the job's events as the engine hands them on, never from
extra store writes: ``val_score`` and ``minibatch_score`` (a candidate scored on val or on
a train minibatch), ``baseline_val_score`` and ``best_val_score``, each at the step of the
metric calls spent so far (the dashboard's x axis), and the budget used (``metric_calls``,
``lm_tokens``, ``lm_cost_usd``, ``wall_time_s``) at each iteration's step. At the end the
run gets the test scores, the best candidate, the reports and its status.
"""

from __future__ import annotations

import json
import logging
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from emery.algorithms.base import SearchContext
from emery.config.schema import TrackingConfig
from emery.core.events import (
    BaselineEvaluated,
    BestUpdated,
    CandidateEvaluated,
    Event,
    IterationCompleted,
)
from emery.integrations.mlflow_run import (
    DEFAULT_EXPERIMENT,
    MetricPoint,
    MlflowRun,
    check_mlflow,
    tracking_uri,
)
from emery.reports.job_result import JobResult
from emery.store.protocol import Store
from emery.store.records import CheckpointRecord, JobRecord

log = logging.getLogger(__name__)

RUN_ID_KEY = "mlflow_run_id"
SPLIT_METRICS = {"val": "val_score", "train": "minibatch_score"}
END_STATUS = {"succeeded": "FINISHED", "failed": "FAILED", "cancelled": "KILLED"}


def check_tracking(config: TrackingConfig) -> None:
    """At job creation: tracking on without MLflow installed is a one-line error."""
    if config.mlflow:
        check_mlflow()


def start_tracking(
    store: Store,
    job: JobRecord,
    config: TrackingConfig,
    base_dir: Path,
    checkpoint: CheckpointRecord | None,
) -> JobTracker | None:
    """The job's run (its ``[tracking]`` section ``config``, a relative tracking URI read
    from ``base_dir``), reopened if the job has one (a resumed job, whose ``checkpoint``
    says the metric calls spent before); None when tracking is off or MLflow cannot be
    reached (a warning: the job runs on untracked)."""
    if not config.mlflow:
        return None
    calls = int(checkpoint.budget.get("metric_calls", 0)) if checkpoint else 0
    try:
        run = MlflowRun.open(
            tracking_uri(config.tracking_uri, base_dir),
            config.experiment or DEFAULT_EXPERIMENT,
            run_id=job.metadata.get(RUN_ID_KEY),
            run_name=job.name,
            tags={"emery.job_id": job.id, "emery.algorithm": job.algorithm},
        )
        if run.created:
            run.log_params(job.resolved_config or job.config)
            store.update_job(job.id, metadata={**job.metadata, RUN_ID_KEY: run.run_id})
    except Exception as exc:
        log.warning("job %s: not tracked in MLflow: %s", job.id, exc)
        return None
    return JobTracker(run, calls)


class JobTracker:
    """Turns the job's events into the run's metrics (``feed``) and ends the run
    (``close``)."""

    def __init__(self, run: MlflowRun, metric_calls: int = 0) -> None:
        self.run = run
        self.calls = metric_calls

    def feed(self, events: Sequence[Event], ctx: SearchContext | None) -> None:
        """Metrics from events as they are stored (never raises)."""
        try:
            for item in events:
                self._feed_one(item, ctx)
        except Exception:
            log.exception("MLflow run %s: events not logged", self.run.run_id)

    def _feed_one(self, item: Event, ctx: SearchContext | None) -> None:
        if item.kind not in _KINDS:
            return
        at = int((item.at.timestamp() if item.at else time.time()) * 1000)
        match item.payload():
            case CandidateEvaluated() as p if p.split in SPLIT_METRICS:
                self.calls += p.new_rollouts
                self._log(SPLIT_METRICS[p.split], p.score, self.calls, at)
            case BaselineEvaluated() as p:
                self._log("baseline_val_score", p.score, self.calls, at)
            case BestUpdated() as p:
                self._log("best_val_score", p.score, self.calls, at)
            case IterationCompleted() as p:
                self.calls = p.metric_calls
                self._log("metric_calls", p.metric_calls, p.iteration, at)
                if ctx is not None:
                    budget = ctx.budget
                    self._log("lm_tokens", budget.lm_tokens(), p.iteration, at)
                    self._log("lm_cost_usd", budget.lm_cost(), p.iteration, at)
                    self._log("wall_time_s", budget.usage.wall_time_s, p.iteration, at)

    def _log(self, key: str, value: float, step: int, at: int) -> None:
        self.run.log(MetricPoint(key, float(value), step, at))

    def close(self, store: Store, job: JobRecord) -> None:
        """Send the metrics still queued; a finished job's test scores, best candidate
        and reports; the run's status from the job's state (never raises)."""
        self.run.flush()
        try:
            if job.state == "succeeded" and job.result:
                self._finish(store, job, JobResult.model_validate(job.result))
            self.run.set_tag("emery.state", job.state)
            if job.state in END_STATUS:
                self.run.set_status(END_STATUS[job.state], terminated=True)
            elif job.state != "running":  # paused: resumed later into this run
                self.run.set_status("SCHEDULED", terminated=False)
        except Exception as exc:
            log.warning("MLflow run %s: not closed: %s", self.run.run_id, exc)

    def _finish(self, store: Store, job: JobRecord, result: JobResult) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        finals = {
            "baseline_test_score": result.baseline_test.mean if result.baseline_test else None,
            "best_test_score": result.best_test.mean if result.best_test else None,
            "lift": result.lift_abs,
        }
        metrics = [Metric(k, v, now, self.calls) for k, v in finals.items() if v is not None]
        self.run.client.log_batch(self.run.run_id, metrics=metrics)
        with tempfile.TemporaryDirectory(prefix="emery-mlflow-") as tmp:
            folder = Path(tmp)
            _write_artifacts(folder, store, job, result)
            self.run.log_artifacts(folder)


def _write_artifacts(folder: Path, store: Store, job: JobRecord, result: JobResult) -> None:
    """``best_candidate/`` (``candidate.json`` and each component as text),
    ``reports/`` (the JSON result, the text and HTML reports) and ``config.json``."""
    from emery.reports.html_report import gather, write_html  # matplotlib: only when needed

    best = result.best_candidate
    if best is not None:
        (folder / "best_candidate").mkdir()
        (folder / "best_candidate" / "candidate.json").write_text(
            best.model_dump_json(indent=2), encoding="utf-8"
        )
        for name, text in best.components.items():
            safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
            (folder / "best_candidate" / f"{safe}.txt").write_text(text, encoding="utf-8")
    reports = folder / "reports"
    reports.mkdir()
    for path in map(Path, result.files.values()):
        if path.is_file():
            (reports / path.name).write_bytes(path.read_bytes())
    write_html(gather(store, job, result), reports / f"{job.id}.html")
    config = job.resolved_config or job.config
    (folder / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")


_KINDS = frozenset(
    model.kind for model in (CandidateEvaluated, BaselineEvaluated, BestUpdated, IterationCompleted)
)
