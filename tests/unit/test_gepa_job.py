"""GEPA run by the job engine (``emery.optimize``) with the scripted models."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_gepa_support import reflection_lm, task_lm, word_problems

import emery
from emery.algorithms.lineage import component_diff, lineage_tree
from emery.data.tasks import builtin_task
from emery.store import MemoryStore
from emery.systems.prompt_program import PromptProgram

pytestmark = pytest.mark.usefixtures("quiet_evaluator_failures")


def test_gepa_job_lifts_test_and_stores_every_candidate_with_its_lineage(tmp_path: Path) -> None:
    dataset = word_problems()
    store = MemoryStore()
    result = emery.optimize(
        PromptProgram(builtin_task("word_problems").program),
        dataset,
        algorithm="gepa",
        budget=300,
        verifier="numeric",
        lm=task_lm(dataset),
        reflection_lm=reflection_lm(),
        runtime={"workdir": str(tmp_path / ".emery")},
        store=store,
    )
    assert result.state == "succeeded"
    assert result.baseline_val == 0.0
    assert result.best_val == 1.0
    assert result.baseline_test is not None
    assert result.best_test is not None
    assert result.best_test.mean > result.baseline_test.mean + 0.5
    events = store.list_events(result.job_id)
    kinds = {e.kind for e in events}
    assert {"gepa.minibatch_accepted", "gepa.val_evaluated", "frontier_updated"} <= kinds
    candidates = store.job_candidates(result.job_id)
    reflected = [c for c in candidates if c.lineage.operation == "reflect"]
    assert reflected
    assert all(c.lineage.details["reflection"]["solve"]["prompt"] for c in reflected)
    # The helpers the CLI and the report use: a lineage tree with scores and the winner's diff.
    assert result.seed_candidate is not None
    assert result.best_candidate is not None
    scores = {s.id: s.score for s in result.top_candidates}
    tree = lineage_tree(candidates, scores, best_id=result.best_candidate.id)
    assert tree.splitlines()[0].startswith(result.seed_candidate.id[:8])
    assert "★ best" in tree
    diff = component_diff(result.seed_candidate, result.best_candidate)
    assert "+" in diff
    assert "Answer: <number>" in diff
