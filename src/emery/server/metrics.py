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

Rollouts per second is ``rate(emery_rollouts_finished_total[1m])``. LM usage is each job's
as of its last checkpoint (``Store.tallies``).
"""

from __future__ import annotations

from collections.abc import Iterator

from fastapi import APIRouter
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from emery.store.protocol import Store

FINISHED = ("succeeded", "failed", "cancelled")


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
        for tally in tallies.lm:
            calls.add_metric([tally.model, tally.role], tally.calls)
            tokens.add_metric([tally.model, tally.role, "prompt"], tally.prompt_tokens)
            tokens.add_metric([tally.model, tally.role, "completion"], tally.completion_tokens)
            cost.add_metric([tally.model, tally.role], tally.cost_usd)
        yield from (calls, tokens, cost)


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
