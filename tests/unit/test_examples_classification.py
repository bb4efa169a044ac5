"""examples/classification: a task set whose own label-set verifier (labels.py) scores the
replies; GEPA, reading that verifier's feedback, finds a prompt that names the labels."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

import pytest
from examples_support import EXAMPLES, copy_example, train_example

from emery.core.models import ChatMessage
from emery.lm import FakeLM

TASK_SET = json.loads((EXAMPLES / "classification" / "reviews.json").read_text())
GOLD = {t["input"]["review"]: TASK_SET["gold_outputs"][t["id"]] for t in TASK_SET["tasks"]}
LABELS = TASK_SET["metadata"]["labels"]


def _classify(messages: Sequence[ChatMessage]) -> str:
    prompt = "\n".join(m["content"] for m in messages)
    review = next(r for r in GOLD if r in prompt)
    if all(label in prompt for label in LABELS):
        return GOLD[review]
    return f"The {GOLD[review].split('_')[0]} team should handle this."  # a sentence


def _reflect(messages: Sequence[ChatMessage]) -> str:
    """Writes the label list the verifier's feedback gives into the instruction."""
    prompt = messages[-1]["content"]
    found = re.search(r"reply with exactly one of (.+?) and nothing else", prompt)
    rule = f" Reply with exactly one of: {found.group(1)}." if found else " Be precise."
    return f"```\nWhich team should handle this app review?{rule}\n```"


TASK_LM = FakeLM(_classify, model="fake/reviews")
"""Replies with the gold label only when the prompt lists every label; else a sentence."""
REFLECTION_LM = FakeLM(_reflect, model="fake/label-reflection")


def test_the_label_set_verifier_guides_the_search_to_the_labels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = copy_example("classification", tmp_path, monkeypatch)
    trained = train_example(
        folder,
        job__budget__metric_calls=40,
        lm__task__model="python/test_examples_classification:TASK_LM",
        lm__reflection__model="python/test_examples_classification:REFLECTION_LM",
    )
    result = trained.result
    assert sum(result.dataset_sizes.values()) == len(TASK_SET["tasks"])
    assert result.baseline_val == 0.0
    assert result.best_val == 1.0
    assert result.best_test is not None
    assert result.best_test.mean == 1.0
    assert result.seed_candidate is not None
    assert result.best_candidate is not None
    seed_feedback = trained.feedback(result.seed_candidate.id)
    assert seed_feedback
    assert all("is not a label: reply with exactly one of" in f for f in seed_feedback)
    best = result.best_candidate.components["classify"]
    assert "Reply with exactly one of: bug, feature_request, billing, account, praise." in best
    assert set(trained.feedback(result.best_candidate.id)) >= {"Correct: 'bug'."}
