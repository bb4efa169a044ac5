"""``GET /metrics``: the store's numbers in Prometheus' text format, counted at each scrape.

| metric | type | labels |
| --- | --- | --- |
| ``emery_jobs`` | gauge | ``state`` |
| ``emery_rollouts`` | gauge | ``status`` (``queuing``: queue depth; ``running``: in flight) |
| ``emery_rollouts_finished_total`` | counter | ``status`` (succeeded, failed, cancelled) |
| ``emery_runners`` | gauge | ``status`` (idle, busy, stopped) |
| ``emery_lm_calls_total`` | counter | ``model``, ``role`` |
| ``emery_lm_tokens_total`` | counter | ``model``, ``role``, ``kind`` (prompt, completion) |
| ``emery_lm_cost_usd_total`` | counter | ``model``, ``role`` |
| ``emery_lm_rate_limited_total`` | counter | ``model``, ``role`` (429-like answers waited out) |
| ``emery_lm_rate_limit_wait_seconds_total`` | counter | ``model``, ``role`` |
| ``emery_step_seconds`` | gauge | ``job``, ``algorithm`` (running jobs only) |

Rollouts per second is ``rate(emery_rollouts_finished_total[1m])``. LM usage is each job's
as of its last checkpoint (``Store.tallies``). A running job's step is the time from its
previous checkpoint (or its start or resume) to its last one, by their events' times.
"""

from __future__ import annotations

from collections.abc import Iterator

from fastapi import APIRouter
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from emery.store.protocol import Store
from emery.store.records import JobFilter

FINISHED = ("succeeded", "failed", "cancelled")
STEP_BOUNDS = ("started", "resumed", "checkpoint_saved")
"""The events a step starts and ends at."""


class StoreCollector(Collector):
    """The metrics above, read from ``store`` when scraped."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def collect(self) -> Iterator[Metric]:
        tallies = self.store.tallies()
        jobs = GaugeMetricFamily("emery_jobs", "Jobs by state.", labels=["state"])
        for state, count in sorted(tallies.jobs.items()):
            jobs.add_metric([state], count)
        yield jobs
        rollouts = GaugeMetricFamily("emery_rollouts", "Rollouts by status.", labels=["status"])
        finished = CounterMetricFamily(
            "emery_rollouts_finished", "Rollouts finished, by status.", labels=["status"]
        )
        for status, count in sorted(tallies.rollouts.items()):
            rollouts.add_metric([status], count)
            if status in FINISHED:
                finished.add_metric([status], count)
        yield rollouts
        yield finished
        runners = GaugeMetricFamily("emery_runners", "Runners by status.", labels=["status"])
        for status, count in sorted(tallies.workers.items()):
            runners.add_metric([status], count)
        yield runners
        labels = ["model", "role"]
        calls = CounterMetricFamily("emery_lm_calls", "LM calls.", labels=labels)
        tokens = CounterMetricFamily("emery_lm_tokens", "LM tokens.", labels=[*labels, "kind"])
        cost = CounterMetricFamily("emery_lm_cost_usd", "LM cost in US dollars.", labels=labels)
        limited = CounterMetricFamily(
            "emery_lm_rate_limited", "Rate-limit answers the calls waited out.", labels=labels
        )
        waited = CounterMetricFamily(
            "emery_lm_rate_limit_wait_seconds",
            "Seconds calls waited on rate limits after such answers.",
            labels=labels,
        )
        for tally in tallies.lm:
            calls.add_metric([tally.model, tally.role], tally.calls)
            tokens.add_metric([tally.model, tally.role, "prompt"], tally.prompt_tokens)
            tokens.add_metric([tally.model, tally.role, "completion"], tally.completion_tokens)
            cost.add_metric([tally.model, tally.role], tally.cost_usd)
            limited.add_metric([tally.model, tally.role], tally.rate_limited)
            waited.add_metric([tally.model, tally.role], tally.rate_limit_wait_s)
        yield from (calls, tokens, cost, limited, waited)
        yield self._steps()

    def _steps(self) -> GaugeMetricFamily:
        steps = GaugeMetricFamily(
            "emery_step_seconds",
            "A running job's last step: seconds from the step's start to its checkpoint.",
            labels=["job", "algorithm"],
        )
        running = self.store.list_jobs(JobFilter(state=["running"]), limit=None).items
        for job in running:
            seconds = last_step_seconds(self.store, job.id)
            if seconds is not None:
                steps.add_metric([job.id, job.algorithm], seconds)
        return steps


def last_step_seconds(store: Store, job_id: str) -> float | None:
    """Seconds between the job's last checkpoint and the event before it (the previous
    checkpoint, or the start or resume the step began at); None before a first step."""
    times = [(e.kind, e.at) for e in store.list_events(job_id, kinds=STEP_BOUNDS) if e.at]
    if len(times) < 2 or times[-1][0] != "checkpoint_saved":
        return None
    (_, start), (_, end) = times[-2], times[-1]
    return max(0.0, (end - start).total_seconds())


def metrics_router(store: Store) -> APIRouter:
    """``GET /metrics`` over ``store`` (a registry of its own: no process metrics)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StoreCollector(store))
    router = APIRouter(tags=["server"])

    @router.get("/metrics", response_class=Response)
    def metrics() -> Response:
        """The store's numbers in Prometheus' text exposition format."""
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return router
