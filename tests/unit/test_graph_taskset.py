"""The task-set JSON format: metadata, tasks and both forms of gold outputs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from emery.core.errors import DataError
from emery.data import SplitFractions, load_dataset

TASKS = [
    {"id": "fr", "input": {"country": "France"}},
    {"id": "jp", "input": {"country": "Japan"}},
    {"id": 7, "input": {"country": "Peru"}},
]
ALL_TEST = SplitFractions(train=0, val=0, test=1)


def write(tmp_path: Path, document: Any) -> Path:
    path = tmp_path / "tasks.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "gold",
    [
        [
            {"task_id": "fr", "output": "Paris"},
            {"task_id": "jp", "output": "Tokyo"},
            {"task_id": 7, "output": "Lima"},
        ],
        {"fr": "Paris", "jp": "Tokyo", "7": "Lima"},
    ],
    ids=["list", "mapping"],
)
def test_both_gold_forms_give_the_same_examples(tmp_path: Path, gold: Any) -> None:
    document = {
        "metadata": {"name": "capitals", "description": "Name the capital city."},
        "tasks": TASKS,
        "gold_outputs": gold,
    }
    dataset = load_dataset(write(tmp_path, document), fractions=ALL_TEST)
    assert dataset.name == "capitals"
    assert dataset.description == "Name the capital city."
    assert {e.id: e.expected for e in dataset} == {"fr": "Paris", "jp": "Tokyo", "7": "Lima"}
    assert {e.id: e.input for e in dataset}["7"] == {"country": "Peru"}


def test_tasks_without_gold_keep_no_expected_output(tmp_path: Path) -> None:
    document = {"tasks": TASKS, "gold_outputs": [{"task_id": "fr", "output": "Paris"}]}
    dataset = load_dataset(write(tmp_path, document), fractions=ALL_TEST)
    assert {e.id: e.expected for e in dataset} == {"fr": "Paris", "jp": None, "7": None}


@pytest.mark.parametrize(
    ("metadata", "verifier"),
    [
        ({"verifier": "numeric"}, {"kind": "numeric"}),
        (
            {"default_verifier": {"kind": "regex", "pattern": "x"}},
            {"kind": "regex", "pattern": "x"},
        ),
        (
            {"rubric": ["names a city", {"name": "capital", "weight": 2}]},
            {
                "kind": "rubric",
                "criteria": [{"name": "names a city"}, {"name": "capital", "weight": 2}],
            },
        ),
        (
            {"verifier": "rubric", "rubric": ["short"]},
            {"kind": "rubric", "criteria": [{"name": "short"}]},
        ),
        ({"verifier": "exact", "rubric": ["short"]}, {"kind": "exact"}),
        ({}, None),
    ],
)
def test_the_metadata_suggests_the_verifier(
    tmp_path: Path, metadata: dict[str, Any], verifier: dict[str, Any] | None
) -> None:
    dataset = load_dataset(write(tmp_path, {"metadata": metadata, "tasks": TASKS}))
    assert dataset.verifier == verifier


def test_a_top_level_verifier_wins_over_the_metadata(tmp_path: Path) -> None:
    document = {"metadata": {"verifier": "numeric"}, "verifier": {"kind": "f1"}, "tasks": TASKS}
    assert load_dataset(write(tmp_path, document)).verifier == {"kind": "f1"}


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (
            {"tasks": TASKS, "gold_outputs": [{"task_id": "de", "output": "Berlin"}]},
            "gold_outputs 0: unknown task_id 'de' (no task has that id)",
        ),
        (
            {"tasks": TASKS, "gold_outputs": {"de": "Berlin"}},
            "gold_outputs['de']: unknown task_id 'de'",
        ),
        (
            {
                "tasks": TASKS,
                "gold_outputs": [
                    {"task_id": "fr", "output": "Paris"},
                    {"task_id": "fr", "output": "Lyon"},
                ],
            },
            "gold_outputs 1: task 'fr' already has a gold output",
        ),
        (
            {"tasks": TASKS, "gold_outputs": [{"id": "fr", "output": "Paris"}]},
            "gold_outputs 0: each entry must be an object with 'task_id' and 'output'",
        ),
        ({"tasks": TASKS, "gold_outputs": "Paris"}, "'gold_outputs' must map task ids"),
        ({"tasks": [], "gold_outputs": []}, "'tasks' is empty"),
        ({"tasks": TASKS, "metadata": {"rubric": "be nice"}}, "'metadata.rubric' must be"),
        ({"tasks": TASKS, "metadata": {"verifier": 3}}, "'metadata.verifier' must be"),
    ],
)
def test_task_set_errors_are_one_line(tmp_path: Path, document: Any, message: str) -> None:
    with pytest.raises(DataError) as info:
        load_dataset(write(tmp_path, document))
    assert message in str(info.value)
    assert "\n" not in str(info.value)
