"""What a job's search has spent and how it ended, kept in the store across a pause.

A step that the budget cuts is undone whole, yet its time and the LM usage of its calls
count. When the search ends, before the final test scoring, the engine stores
``end_write``: a checkpoint holding the budget and the LM usage as the search left them
(the cut step's included) and, in the job's metadata, the stop reason (``search_ended``).
A job paused, or killed, after that resumes into the test scoring only (``ended_reason``):
the same winner, no more steps.

A pause undoes the step it interrupts too (a resume repeats it); the seconds that step
had run count against the wall time all the same: ``stop_metadata`` keeps the search time
used at the stop in the job's metadata (``search_wall_time_s``) and ``restored_usage``
gives it back to the resumed job's budget. A kill stores nothing: the seconds of the step
it cut are not counted.
"""

from __future__ import annotations

from typing import Any

from emery.algorithms.base import SearchContext
from emery.algorithms.search_loop import SearchOutcome
from emery.evaluation.budget import BudgetUsage
from emery.jobs.prepaid import PREPAID
from emery.jobs.rows import evaluation_rows
from emery.jobs.runtime import Runtime
from emery.store.records import CheckpointRecord, StepWrite

ENDED = "search_ended"
"""The metadata key of the search's stop reason, stored before the final test scoring."""
WALL_TIME = "search_wall_time_s"
"""The metadata key of the search time used when the job last stopped (a pause)."""


def ended_reason(metadata: dict[str, Any]) -> str | None:
    """Why the job's search ended (None while it has not)."""
    reason = metadata.get(ENDED)
    return str(reason) if reason is not None else None


def restored_usage(
    checkpoint: CheckpointRecord | None, metadata: dict[str, Any]
) -> BudgetUsage | None:
    """The budget spent as the job's last checkpoint holds it, with the search time used
    up to its last stop when that is more (the seconds of a step the stop undid)."""
    usage = BudgetUsage.model_validate(checkpoint.budget) if checkpoint is not None else None
    spent = float(metadata.get(WALL_TIME) or 0.0)
    if spent > (usage.wall_time_s if usage is not None else 0.0):
        usage = usage or BudgetUsage()
        usage.wall_time_s = spent
    return usage


def stop_metadata(
    metadata: dict[str, Any], usage: BudgetUsage, checkpoint: CheckpointRecord | None
) -> dict[str, Any]:
    """``metadata`` with the search time ``usage`` holds at a stop, when that is more than
    the store knows of (``metadata`` itself otherwise)."""
    if usage.wall_time_s <= _stored_wall_time(checkpoint, metadata):
        return metadata
    return {**metadata, WALL_TIME: usage.wall_time_s}


def _stored_wall_time(checkpoint: CheckpointRecord | None, metadata: dict[str, Any]) -> float:
    usage = restored_usage(checkpoint, metadata)
    return usage.wall_time_s if usage is not None else 0.0


def end_write(
    ctx: SearchContext,
    runtime: Runtime,
    outcome: SearchOutcome,
    metadata: dict[str, Any],
    *,
    job_id: str,
    owner: str,
) -> StepWrite:
    """The transaction recording the end of the search: what the search left unstored
    (a cut step's events), a checkpoint of the last state with the budget and LM usage
    spent (a cut step's included) and the stop reason in the job's metadata. The finished
    runs of a cut step are dropped: the search never repeats it."""
    events, candidates = ctx.log.drain()
    evaluations, rollouts, attempts = evaluation_rows(
        runtime, ctx.evaluations.drain(), job_id=job_id, owner=owner
    )
    ctx.evaluations.prepaid.clear()
    kept = {key: value for key, value in metadata.items() if key not in (PREPAID, WALL_TIME)}
    usage = ctx.budget.usage
    return StepWrite(
        events=events,
        candidates=candidates,
        evaluations=evaluations,
        rollouts=rollouts,
        attempts=attempts,
        checkpoint=CheckpointRecord(
            job_id=job_id,
            number=usage.iterations,
            state=outcome.state.model_dump(mode="json"),
            budget=usage.model_dump(mode="json"),
            usage={
                role: u.model_dump(mode="json") for role, u in ctx.budget.meter.by_role().items()
            },
        ),
        job_fields={"metadata": {**kept, ENDED: outcome.reason}},
        expect_owner=owner,
    )
