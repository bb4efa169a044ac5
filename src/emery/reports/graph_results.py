"""The graph a job's best (or any) candidate runs: for export, for the report, and (a
verifier graph) to score a trace."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from emery.config.loading import job_config
from emery.config.resolve import JobInputs
from emery.core.errors import EmeryError
from emery.core.models import Candidate
from emery.reports.inference import chosen_candidate, job_system, run_inference
from emery.store.protocol import Store
from emery.systems.graph.export import candidate_graph
from emery.systems.graph.spec import GraphConfig
from emery.systems.graph.system import SPEC_COMPONENT, GraphSystem, read_spec
from emery.verifiers.agreement import GraphVerdict, reward_of


def job_graph(
    store: Store,
    job_id: str,
    *,
    candidate: Candidate | str | None = None,
    objects: JobInputs | None = None,
) -> GraphConfig:
    """The whole graph (texts included) ``candidate`` (default: the job's best) runs;
    EmeryError when the job has no best candidate or its system is not a graph."""
    chosen = chosen_candidate(store, job_id, candidate)
    kind = getattr(job_config(store.get_job(job_id)).system, "kind", None)
    system = job_system(store, job_id, objects) if kind in (None, "graph") else None
    if not isinstance(system, GraphSystem):
        what = kind or type(system).__name__
        raise EmeryError(f"job {job_id} optimizes a {what} system, not a graph")
    return candidate_graph(system, chosen)


def report_graph(store: Store, job_id: str, candidate: Candidate | None) -> GraphConfig | None:
    """The graph ``candidate`` runs, for the report: read from its ``graph:spec`` (else as
    ``job_graph`` finds it); None for a job whose system is not a graph or cannot be built
    here."""
    if candidate is None:
        return None
    spec = candidate.components.get(SPEC_COMPONENT)
    try:
        if spec is not None:
            return candidate_graph(GraphSystem(read_spec(spec)), candidate)
        return job_graph(store, job_id, candidate=candidate)
    except (EmeryError, ValidationError):
        return None


async def run_verifier(
    store: Store,
    job_id: str,
    trace: Mapping[str, Any],
    *,
    candidate: Candidate | str | None = None,
    objects: JobInputs | None = None,
) -> GraphVerdict:
    """The reward the job's verifier graph (its best candidate, or ``candidate``) gives
    ``trace`` (the graph's input fields: input, output, transcript, ...); EmeryError when
    the job's graph is not a verifier or its output holds no score."""
    chosen = chosen_candidate(store, job_id, candidate)
    graph = job_graph(store, job_id, candidate=chosen, objects=objects)
    if graph.graph_type != "verifier":
        raise EmeryError(f"job {job_id} trains a {graph.graph_type} graph, not a verifier graph")
    output = await run_inference(store, job_id, dict(trace), candidate=chosen, objects=objects)
    try:
        return reward_of(output)
    except ValueError as exc:
        raise EmeryError(f"the verifier graph's output holds no score: {exc}") from None
