"""APO end to end on the local model (SmolLM2-135M) with a tiny budget: the wiring (critique,
edit, the best the stored best), on SmolLM2's recorded replies (`recorded_lm`; the real
model runs in the GEPA job test)."""

from __future__ import annotations

from pathlib import Path

import pytest

from emery.algorithms import StepRecord, build_algorithm, run_search
from emery.algorithms.apo import ApoState
from emery.algorithms.context import build_search_context
from emery.config import parse_config
from emery.config.resolve import (
    build_models,
    open_cache,
    resolve_dataset,
    resolve_system,
    resolve_verifier,
)
from emery.systems.templates import placeholders

from .recorded_lm import Recordings, recorded_lm

pytestmark = pytest.mark.integration

__all__ = ["recorded_lm"]  # the fixture

MODEL = "local/smollm2-135m"


async def test_apo_runs_a_round_on_the_local_model(tmp_path: Path, recorded_lm: Recordings) -> None:
    config = parse_config(
        {
            "job": {"algorithm": "apo", "budget": {"metric_calls": 8}},
            "dataset": {"task": "word_problems", "n_train": 2, "n_val": 2, "n_test": 0},
            "lm": {
                "task": {"model": MODEL, "max_tokens": 32, "n_ctx": 2048},
                "reflection": {"model": MODEL, "max_tokens": 80, "n_ctx": 2048},
            },
            "runtime": {"workdir": str(tmp_path / ".emery")},
            "algorithm": {
                "apo": {
                    "beam_width": 1,
                    "branch_factor": 1,
                    "rounds": 1,
                    "gradient_batch_size": 2,
                    "val_batch_size": 2,
                    "critique_max_tokens": 80,
                    "edit_max_tokens": 80,
                    "skip_perfect_batches": False,
                    # this test is about the LM's critique and edit; operator children
                    # would take the 8 metric calls the round needs
                    "operator_children": 0,
                }
            },
        }
    )
    dataset = resolve_dataset(config)
    cache = open_cache(config)
    models = build_models(config, roles=("task", "reflection"), cache=cache)
    ctx = build_search_context(
        system=resolve_system(config),
        dataset=dataset,
        verifier=resolve_verifier(config, dataset),
        lms=models.by_role,
        budget=config.job.budget,
        meter=models.meter,
        concurrency=4,
    )
    records: list[StepRecord] = []

    async def keep(record: StepRecord) -> None:
        records.append(record)

    try:
        outcome = await run_search(
            build_algorithm("apo", config.algorithm["apo"]), ctx, on_step=keep
        )
    finally:
        if cache is not None:
            cache.close()

    state = outcome.state
    assert isinstance(state, ApoState)
    assert ApoState.model_validate_json(state.model_dump_json()) == state
    assert ctx.budget.usage.metric_calls <= 8
    kinds = [e.kind for r in records for e in r.events]
    assert kinds.count("baseline_evaluated") == 1
    critiques = [e.data for r in records for e in r.events if e.kind == "apo.critique"]
    edits = [e.data for r in records for e in r.events if e.kind == "apo.edit"]
    assert critiques
    assert len(edits) == len(critiques)
    for edit in edits:
        assert edit["accepted"] == (edit["child_id"] is not None)
        assert edit["accepted"] or edit["reason"]
    for candidate in ctx.candidates.values():
        assert placeholders(candidate.components["solve"]) == set()
    # SmolLM2's edits need not beat the seed on two val examples, so no lift is asserted;
    # the best must still be the highest full-val score of the search, the best's own.
    full_val = state.full_val_scores
    assert all(0.0 <= score <= 1.0 for score in full_val.values())
    assert state.baseline_val_score == full_val[state.seed_candidate_id]
    assert state.best_val_score == max(full_val.values())
    assert state.best_candidate_id is not None
    assert full_val[state.best_candidate_id] == state.best_val_score
    usage = models.meter.by_role()
    assert usage["reflection"].calls == len(critiques) + sum(
        1 for e in edits if e["variant"] is not None
    )
    assert usage["task"].calls > 0
