"""A job whose candidates differ in cost: ``FixedChildren`` scores the seed and three
fixed instructions on val with ``jobs_support.careful_task_lm`` (right under any
instruction that says "carefully"): ``LONG`` and ``SHORT`` both score 1.0, ``SHORT`` with
fewer tokens, ``TINY`` scores 0 with the fewest. Imported as ``cost_front_support``."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import jobs_support as js
from pydantic import Field

from emery.algorithms.base import AlgorithmSettings, AlgorithmState, SearchContext
from emery.algorithms.registry import AlgorithmSpec
from emery.config import parse_config
from emery.core.events import BaselineEvaluated, BestUpdated
from emery.core.models import Lineage
from emery.jobs import create_job, run_job
from emery.reports import JobResult
from emery.store import MemoryStore

LONG = "Solve it carefully, checking each step twice and restating every quantity first."
SHORT = "Work carefully."
TINY = "Go."


class FixedSettings(AlgorithmSettings):
    instructions: list[str] = Field(default_factory=lambda: [LONG, SHORT, TINY])


TOLD: list[tuple[tuple[str, ...], str]] = []
"""The objectives and the ``select`` rule each job's search was told, in order."""


class FixedChildren:
    """Scores the seed, then each of ``instructions`` as a child, on val; the best is the
    first with the highest val score."""

    name: ClassVar[str] = "fixed_children"
    state_type = AlgorithmState

    def __init__(self, settings: FixedSettings) -> None:
        self.settings = settings

    async def start(self, ctx: SearchContext) -> AlgorithmState:
        TOLD.append((ctx.objectives, ctx.select.text))
        seed = ctx.add_candidate(ctx.seed_candidate)
        scored = await ctx.evaluate(seed, ctx.val, "val")
        ctx.emit(BaselineEvaluated(candidate_id=seed.id, split="val", score=scored.mean, n=8))
        ctx.emit(BestUpdated(candidate_id=seed.id, score=scored.mean))
        return AlgorithmState(
            seed_candidate_id=seed.id,
            baseline_val_score=scored.mean,
            best_candidate_id=seed.id,
            best_val_score=scored.mean,
        )

    async def step(self, ctx: SearchContext, state: AlgorithmState) -> AlgorithmState:
        seed = ctx.candidates[state.seed_candidate_id]
        for text in self.settings.instructions:
            child = ctx.add_candidate(
                seed.derive(
                    components={"solve": text},
                    lineage=Lineage(parents=(seed.id,), generation=1, operation="mutate"),
                )
            )
            scored = await ctx.evaluate(child, ctx.val, "val")
            if state.best_val_score is None or scored.mean > state.best_val_score:
                ctx.emit(BestUpdated(candidate_id=child.id, score=scored.mean))
                state.best_candidate_id, state.best_val_score = child.id, scored.mean
        state.iteration += 1
        state.done, state.done_reason = True, "every child scored"
        return state


SPEC = AlgorithmSpec(name="fixed_children", settings=FixedSettings, factory=FixedChildren)


def run_job_in(store: MemoryStore, tmp_path: Path, **job: object) -> str:
    """Create and run a ``FixedChildren`` job with ``job``'s ``[job]`` keys; its id."""
    given = js.search_config(tmp_path / ".emery", algorithm="cost_front_support:SPEC", settings={})
    given["job"] = {**given["job"], **job}
    given["lm"] = {"task": {"model": "python/jobs_support:careful_task_lm"}}
    created = create_job(store, parse_config(given), given=given, base_dir=tmp_path)
    done = run_job(store, created.id)
    assert done.state == "succeeded", done.error
    return done.id


def run_fixed_job(tmp_path: Path, **job: object) -> tuple[MemoryStore, str, JobResult]:
    """``run_job_in`` a fresh store: the store, the job's id and its result."""
    store = MemoryStore()
    job_id = run_job_in(store, tmp_path, **job)
    return store, job_id, JobResult.model_validate(store.get_job(job_id).result)


def ids_by_text(store: MemoryStore, job_id: str) -> dict[str, str]:
    return {c.components["solve"]: c.id for c in store.job_candidates(job_id)}
