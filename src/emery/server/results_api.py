"""What a job found and how: its result, candidates (lineage, per-split scores, diffs, a
split's ranking), evaluations per example, rollouts with their attempts, and a rollout's
spans as a tree."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from emery.jobs.kinds import kind_of
from emery.sdk.server_client import CANDIDATE_SORTS
from emery.server.params import Offset
from emery.server.views import DiffBase, candidate_view, candidate_views, diff_view, seed_id
from emery.server.views import span_tree as build_tree
from emery.store.protocol import Store
from emery.store.records import EvaluationFilter, RolloutFilter
from emery.tracing.store_recorder import load_spans

Limit = Annotated[int, Query(ge=1, le=1000)]
SplitQuery = Annotated[str | None, Query(pattern="^(train|val|test)$")]
_SORT_KEY = f"[-+]?({'|'.join(CANDIDATE_SORTS)})"
CandidateSort = Annotated[
    str,
    Query(
        pattern=f"^{_SORT_KEY}(,{_SORT_KEY})*$",
        max_length=200,
        description="Columns to sort by, comma separated; ``-`` before one sorts it descending.",
    ),
]


def candidates_router(store: Store) -> APIRouter:
    """Candidate and evaluation routes of a job."""
    router = APIRouter(prefix="/api/jobs/{job}", tags=["candidates"])

    @router.get("/candidates")
    def candidates(job: str) -> dict[str, Any]:
        """Every candidate in creation order, with parents, operation and split scores."""
        job_id = store.resolve_job_id(job)
        return {
            "job_id": job_id,
            "best_candidate_id": store.get_job(job_id).best_candidate_id,
            "seed_candidate_id": seed_id(store, job_id),
            "candidates": candidate_views(store, job_id),
        }

    @router.get("/scores")
    def scores(
        job: str,
        split: Annotated[str, Query(pattern="^(train|val|test)$")] = "val",
        sort: CandidateSort = "-score,-n,ordinal",
        limit: Limit = 10,
        offset: Offset = 0,
    ) -> dict[str, Any]:
        """The job's candidates ranked by their runs on ``split`` (mean score, runs, failed,
        timed out and unreadable), as ``emery candidates`` lists them."""
        job_id = store.resolve_job_id(job)
        page = store.list_candidates(job_id, split=split, sort=sort, limit=limit, offset=offset)
        return {
            "job_id": job_id,
            "split": split,
            "best_candidate_id": store.get_job(job_id).best_candidate_id,
            "total": page.total,
            "offset": offset,
            "limit": limit,
            "candidates": [record.model_dump(mode="json") for record in page.items],
        }

    @router.get("/result")
    def result(job: str) -> dict[str, Any]:
        """The job's result as ``emery report --json`` prints it: the final one once it
        succeeded, a prompt job's search so far before; null for a kind (SFT, RL) that
        reports only once it succeeds."""
        record = store.get_job(store.resolve_job_id(job))
        found = kind_of(record).result(store, record)
        return {
            "job_id": record.id,
            "kind": record.kind,
            "state": record.state,
            "result": None if found is None else found.model_dump(mode="json"),
        }

    @router.get("/candidates/{candidate}")
    def candidate(job: str, candidate: str) -> dict[str, Any]:
        """One candidate (id or prefix) in full: texts, demos, lineage and scores."""
        return candidate_view(store, store.resolve_job_id(job), candidate)

    @router.get("/candidates/{candidate}/diff")
    def diff(job: str, candidate: str, against: DiffBase = "parent") -> dict[str, Any]:
        """The candidate's changes against its first parent or the job's seed."""
        return diff_view(store, store.resolve_job_id(job), candidate, against)

    @router.get("/evaluations")
    def evaluations(
        job: str,
        candidate_id: str | None = None,
        split: SplitQuery = None,
        example_id: str | None = None,
        limit: Limit = 100,
        offset: Offset = 0,
    ) -> dict[str, Any]:
        """Scored runs per example: output, score, feedback, error and the rollout."""
        page = store.list_evaluations(
            EvaluationFilter(
                job_id=store.resolve_job_id(job),
                candidate_id=candidate_id,
                split=split,
                example_id=example_id,
            ),
            limit=limit,
            offset=offset,
        )
        items = [
            {**e.result.model_dump(mode="json"), "rollout_id": e.rollout_id, "scope": e.scope}
            for e in page.items
        ]
        return {"total": page.total, "offset": offset, "limit": limit, "evaluations": items}

    @router.get("/rollouts")
    def rollouts(
        job: str,
        candidate_id: str | None = None,
        split: SplitQuery = None,
        example_id: str | None = None,
        status: Annotated[list[str] | None, Query()] = None,
        limit: Limit = 100,
        offset: Offset = 0,
    ) -> dict[str, Any]:
        """The job's rollouts (runs of a candidate on an example), newest filters applied."""
        page = store.list_rollouts(
            RolloutFilter(
                job_id=store.resolve_job_id(job),
                candidate_id=candidate_id,
                split=split,
                example_id=example_id,
                status=status or None,
            ),
            limit=limit,
            offset=offset,
        )
        items = [rollout.model_dump(mode="json") for rollout in page.items]
        return {"total": page.total, "offset": offset, "limit": limit, "rollouts": items}

    return router


def rollouts_router(store: Store) -> APIRouter:
    """Routes of one rollout: itself with its attempts, and its spans as a tree."""
    router = APIRouter(prefix="/api/rollouts/{rollout_id}", tags=["rollouts"])

    @router.get("")
    def rollout(rollout_id: str) -> dict[str, Any]:
        """The rollout with its attempts."""
        record = store.get_rollout(rollout_id)
        attempts = [a.model_dump(mode="json") for a in store.list_attempts(rollout_id)]
        return {**record.model_dump(mode="json"), "attempts": attempts}

    @router.get("/attempts")
    def attempts(rollout_id: str) -> dict[str, Any]:
        """The rollout's attempts in order."""
        store.get_rollout(rollout_id)
        items = [a.model_dump(mode="json") for a in store.list_attempts(rollout_id)]
        return {"rollout_id": rollout_id, "attempts": items}

    @router.get("/spans")
    def spans(rollout_id: str, attempt_id: str | None = None) -> dict[str, Any]:
        """The rollout's spans (one attempt's with ``attempt_id``) as a tree of children."""
        store.get_rollout(rollout_id)
        records = load_spans(store, rollout_id, attempt_id)
        return {"rollout_id": rollout_id, "count": len(records), "spans": build_tree(records)}

    return router
