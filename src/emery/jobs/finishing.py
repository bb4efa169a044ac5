"""Finishing a job whose search ended: test scores, the result and its files, success.

The engine has stored the end of the search before (``search_end``: the stop reason, and
the budget and LM usage spent in the last checkpoint, which the result reads), so a job
stopped here resumes into this finishing only. The winner is the search's best, or the
candidate the job's ``select`` rule picks among those scored on val (``jobs/winner.py``).
The seed and the winner are scored on the test split (not charged to the budget, its time
not the search's), the result is built from the store and written as JSON and text next
to the config, and the last rows, the result and the ``succeeded`` state are stored in
one commit.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from emery.algorithms.base import SearchContext
from emery.algorithms.search_loop import SearchOutcome
from emery.core.events import Event
from emery.core.models import Candidate
from emery.evaluation.label_agreement import label_agreement
from emery.evaluation.stats import ScoreSummary
from emery.jobs.rows import evaluation_rows
from emery.jobs.runtime import Runtime
from emery.jobs.winner import cost_front
from emery.reports.job_result import (
    JobResult,
    build_result,
    event_warnings,
    result_paths,
    write_result,
)
from emery.reports.report import render_report
from emery.store.protocol import Store
from emery.store.records import JobRecord, StepWrite


async def finish_job(
    store: Store,
    job_id: str,
    *,
    owner: str,
    ctx: SearchContext,
    runtime: Runtime,
    outcome: SearchOutcome,
    note: Callable[[str], None],
) -> list[Event]:
    """Score seed and best on test (uncharged), write the result, succeed: one commit.
    Returns the events stored."""
    state = outcome.state
    seed = ctx.candidates.get(state.seed_candidate_id, ctx.seed_candidate)
    front = cost_front(ctx, runtime.config.job, state)
    best = ctx.candidates.get(front.winner_id if front else state.best_candidate_id, seed)
    searched = ctx.budget.meter.by_role()  # what the LM limits counted, before the tests
    tests = await score_on_test(ctx, runtime, seed, best, note)
    references = await score_references(ctx, runtime, note)
    labels = await label_agreement(runtime.verifier, list(runtime.dataset))
    events, candidates = ctx.log.drain()
    evaluations, rollouts, attempts = evaluation_rows(
        runtime, ctx.evaluations.drain(), job_id=job_id, owner=owner
    )
    job = store.get_job(job_id)
    result = build_result(
        store,
        job,
        baseline_test=tests.get(seed.id),
        best_test=tests.get(best.id),
        references_test=references,
        usage=ctx.budget.meter.by_role(),
        search_usage=searched,
        state="succeeded",
        stop_reason=outcome.reason,
        dataset_sizes={str(k): v for k, v in runtime.dataset.sizes().items()},
        labels=labels,
        front=front,
    )
    result.warnings += event_warnings(events)  # stored below, with the result
    result.evaluations_paid += len(evaluations)
    result.finished_at = datetime.now(UTC)
    write_result_files(job, result, runtime.base_dir)
    write = StepWrite(
        events=events,
        candidates=candidates,
        evaluations=evaluations,
        rollouts=rollouts,
        attempts=attempts,
        job_fields=_final_fields(result, outcome, best.id),
        expect_owner=owner,
        final_state="succeeded",
        final_reason=outcome.reason,
    )
    return store.commit_step(job_id, write)


def _final_fields(result: JobResult, outcome: SearchOutcome, best_id: str) -> dict[str, Any]:
    """The job row's columns when it succeeds (its finish time is the result's)."""
    state = outcome.state
    fields: dict[str, Any] = {
        "result": result.model_dump(mode="json"),
        "stop_reason": outcome.reason,
        "best_candidate_id": best_id,
        "best_score": result.best_val if result.front else state.best_val_score,
        "baseline_score": state.baseline_val_score,
    }
    if result.finished_at is not None:
        fields["finished_at"] = result.finished_at.timestamp()
    return fields


async def score_on_test(
    ctx: SearchContext,
    runtime: Runtime,
    seed: Candidate,
    best: Candidate,
    note: Callable[[str], None],
) -> dict[str, ScoreSummary]:
    """Test summaries of the seed and the best candidate by id (none without a test split)."""
    tests: dict[str, ScoreSummary] = {}
    if not runtime.dataset.test:
        return tests
    targets = [("seed", seed)] + ([("best", best)] if best.id != seed.id else [])
    for label, candidate in targets:
        note(
            f"scoring the {label} candidate {candidate.id[:8]} on the test split"
            f" ({len(runtime.dataset.test)} examples)"
        )
        scored = await ctx.evaluations.evaluate(
            candidate, runtime.dataset.test, "test", charge=False
        )
        tests[candidate.id] = scored.summary()
    return tests


async def score_references(
    ctx: SearchContext, runtime: Runtime, note: Callable[[str], None]
) -> dict[str, ScoreSummary]:
    """Test summaries of the ``[references.NAME]`` candidates (stored as candidates with
    the operation ``reference``), by name."""
    scores: dict[str, ScoreSummary] = {}
    if not runtime.dataset.test:
        return scores
    for name, candidate in runtime.references.items():
        note(f"scoring the reference {name!r} on the test split")
        ctx.add_candidate(candidate)
        scored = await ctx.evaluations.evaluate(
            candidate, runtime.dataset.test, "test", charge=False
        )
        scores[name] = scored.summary()
    return scores


def write_result_files(job: JobRecord, result: JobResult, base_dir: Path) -> None:
    """Write the JSON result and the text report; record their paths in ``result.files``."""
    json_path, text_path = result_paths(job, base_dir)
    result.files = {"json": str(json_path), "report": str(text_path)}
    write_result(result, render_report(result), json_path, text_path)
