"""APO as a job: through ``emery.optimize``, the job engine and a store."""

from __future__ import annotations

from pathlib import Path

from test_apo_support import (
    GOOD,
    HALF,
    REWRITE,
    dataset,
    fenced,
    program,
    reflection_lm,
    task_reply,
)

import emery
from emery.lm import FakeLM
from emery.store import MemoryStore
from emery.verifiers.numeric import NumericMatch


def test_apo_job_finds_the_better_prompt_and_stores_its_events(tmp_path: Path) -> None:
    store = MemoryStore()
    data = dataset()
    test = [e.model_copy(update={"id": f"test-{i}"}) for i, e in enumerate(data.val[:3])]
    data = data.model_copy(update={"test": test})
    result = emery.optimize(
        program(),
        data,
        algorithm="apo",
        budget={"metric_calls": 200},
        verifier=NumericMatch(),
        lm=FakeLM(task_reply, model="fake/task"),
        reflection_lm=reflection_lm([fenced(HALF), fenced(GOOD)]),
        settings={
            "beam_width": 2,
            "branch_factor": 2,
            "rounds": 2,
            "gradient_batch_size": 3,
            "edit_prompts": [str(REWRITE)],
            "operator_children": 0,  # the LM's edits alone: the counts below are theirs
        },
        runtime={"workdir": str(tmp_path / ".emery")},
        store=store,
    )
    assert result.state == "succeeded"
    assert result.baseline_val == 0.0
    assert result.best_val == 1.0
    assert result.best_candidate is not None
    assert result.best_candidate.components["solve"] == GOOD
    assert result.best_test is not None
    assert result.best_test.mean == 1.0
    kinds = [e.kind for e in store.list_events(result.job_id)]
    for kind in ("apo.round_started", "apo.critique", "apo.edit", "apo.beam_updated"):
        assert kind in kinds
    # round 2: the perfect parent's batches are skipped, the other parent's edits repeat a
    # beam member, so no child is left to score
    assert kinds.count("apo.full_val_scored") == 1
    assert kinds.count("apo.expansion_skipped") == 2
