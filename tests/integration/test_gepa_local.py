"""GEPA as a job on the real embedded model (SmolLM2-135M) with a real SQLite store.

SmolLM2 is far too weak to write good instructions: most of its reflection replies are
unusable. The job must still complete, record every proposal (usable or not) and never
crash on what the model writes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import emery
from emery.store.backends import open_store

pytestmark = pytest.mark.integration

MODEL = "local/smollm2-135m"


def test_gepa_job_on_the_local_model_records_every_proposal(tmp_path: Path) -> None:
    style = "compact"  # what reflection_style "auto" picks for a local model (the standard
    # style's prompt and parsing are covered with scripted models in test_gepa_reflection)
    store_path = tmp_path / "emery.db"
    lm = {"model": MODEL, "max_tokens": 48, "n_ctx": 2048}
    result = emery.optimize(
        None,
        {"task": "word_problems", "n_train": 4, "n_val": 3, "n_test": 2},
        algorithm="gepa",
        budget=18,
        lm=lm,
        reflection_lm={**lm, "max_tokens": 96},
        settings={"reflection_style": style, "reflection_max_tokens": 96, "proposal_attempts": 2},
        runtime={"workdir": str(tmp_path / ".emery"), "concurrency": 2},
        store=str(store_path),
    )
    assert result.state == "succeeded", result.error
    assert result.budget.metric_calls <= 18
    assert result.best_test is not None

    store = open_store(store_path)
    events = store.list_events(result.job_id)
    kinds = [e.kind for e in events]
    assert kinds[-1] == "succeeded"
    # SmolLM2 may well write nothing better than the seed, so no lift is asserted; the
    # reported scores must still be the stored ones: the baseline is the seed's full-val
    # score and the best is the best's own, at least the seed's and at most the highest of
    # any candidate (two_stage: a higher one not shown better than the seed does not win).
    val_scores = {
        e.data["candidate_id"]: e.data["score"] for e in events if e.kind == "gepa.val_evaluated"
    }
    assert result.seed_candidate is not None
    assert result.best_candidate is not None
    assert all(0.0 <= score <= 1.0 for score in val_scores.values())
    assert result.baseline_val == val_scores[result.seed_candidate.id]
    assert result.baseline_val <= result.best_val <= max(val_scores.values())
    assert val_scores[result.best_candidate.id] == result.best_val
    datasets = [e for e in events if e.kind == "gepa.reflective_dataset"]
    usable = [e for e in events if e.kind == "gepa.proposal"]
    unusable = [e for e in events if e.kind == "gepa.proposal_invalid"]
    assert datasets, "at least one reflection ran"
    assert all(e.data["style"] == style for e in datasets)
    assert usable or unusable
    assert all(e.data["reason"] for e in unusable)
    # Every usable proposal is a stored candidate whose lineage holds the prompt and reply.
    candidates = {c.id: c for c in store.job_candidates(result.job_id)}
    proposed = {c.components["solve"]: c for c in candidates.values()}
    for item in usable:
        candidate = proposed[item.data["text"]]
        reflection = candidate.lineage.details["reflection"]["solve"]
        assert reflection["prompt"]
        assert reflection["attempts"][-1]["problem"] is None
    # Each reflection made one to two attempts, all recorded as events.
    per_iteration: dict[int, int] = {}
    for item in usable + unusable:
        per_iteration[item.data["iteration"]] = per_iteration.get(item.data["iteration"], 0) + 1
    assert all(1 <= n <= 2 for n in per_iteration.values())
