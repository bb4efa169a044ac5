"""``dataset.n_train/n_val/n_test`` and rationale fields work for file datasets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from emery.config.resolve import resolve_dataset
from emery.config.schema import JobConfig
from emery.core.errors import DataError
from emery.data.loaders import FieldMap, load_dataset
from emery.evaluation.budget import BudgetConfig


def write_rows(path: Path, per_split: int = 5) -> Path:
    rows = [
        {
            "id": f"{split}-{i}",
            "input": {"q": f"{split} {i}"},
            "expected": i,
            "split": split,
            "meta": {"equation": f"( {i} + 0 )"},
        }
        for split in ("train", "val", "test")
        for i in range(per_split)
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    return path


def config(path: Path, **dataset: object) -> JobConfig:
    return JobConfig.model_validate(
        {"job": {"algorithm": "baseline"}, "dataset": {"path": str(path), **dataset}}
    )


def test_sizes_keep_the_first_rows_of_each_split_in_file_order(tmp_path: Path) -> None:
    path = write_rows(tmp_path / "d.jsonl")
    data = resolve_dataset(config(path, n_train=2, n_val=3, n_test=1))
    assert [e.id for e in data.train] == ["train-0", "train-1"]
    assert [e.id for e in data.val] == ["val-0", "val-1", "val-2"]
    assert [e.id for e in data.test] == ["test-0"]


def test_unset_sizes_keep_a_split_whole_and_limit_still_applies(tmp_path: Path) -> None:
    path = write_rows(tmp_path / "d.jsonl")
    data = resolve_dataset(config(path, n_val=2, limit=4))
    assert data.sizes() == {"train": 4, "val": 2, "test": 4}


def test_asking_for_more_rows_than_a_split_has_is_refused(tmp_path: Path) -> None:
    path = write_rows(tmp_path / "d.jsonl")
    with pytest.raises(DataError, match=r"dataset.n_val = 9, but the val split has only 5"):
        resolve_dataset(config(path, n_val=9))


def test_rationale_from_meta_or_a_column(tmp_path: Path) -> None:
    path = write_rows(tmp_path / "d.jsonl", per_split=1)
    data = load_dataset(path, fields=FieldMap(rationale_field="meta.equation"))
    assert data.train[0].meta["rationale"] == "( 0 + 0 )"
    flat = tmp_path / "flat.jsonl"
    flat.write_text(json.dumps({"id": "a", "q": "1+1", "why": "1+1=2", "expected": 2}))
    example = next(iter(load_dataset(flat, fields=FieldMap(rationale_field="why"))))
    assert example.input == {"q": "1+1"}
    assert example.meta["rationale"] == "1+1=2"


def test_a_missing_rationale_names_the_row(tmp_path: Path) -> None:
    flat = tmp_path / "flat.jsonl"
    flat.write_text(json.dumps({"id": "a", "q": "1+1", "expected": 2}))
    with pytest.raises(DataError, match=r"line 1: rationale field 'why' is missing"):
        load_dataset(flat, fields=FieldMap(rationale_field="why"))


def with_budget(base: JobConfig, metric_calls: int | None) -> JobConfig:
    job = base.job.model_copy(update={"budget": BudgetConfig(metric_calls=metric_calls)})
    return base.model_copy(update={"job": job})


def test_val_without_a_size_is_capped_to_a_fifth_of_the_budget(tmp_path: Path) -> None:
    path = write_rows(tmp_path / "d.jsonl", per_split=30)
    assert len(resolve_dataset(with_budget(config(path), 100)).val) == 20
    assert len(resolve_dataset(with_budget(config(path), 20)).val) == 10  # at least 10
    assert len(resolve_dataset(with_budget(config(path), 1000)).val) == 30  # all there is
    assert len(resolve_dataset(with_budget(config(path), None)).val) == 30
    assert len(resolve_dataset(with_budget(config(path, n_val=25), 100)).val) == 25
    tasks = {"job": {"algorithm": "baseline"}, "dataset": {"task": "word_problems"}}
    task = JobConfig.model_validate(tasks)
    assert len(resolve_dataset(with_budget(task, 100)).val) == 20
    assert len(resolve_dataset(with_budget(task, None)).val) == 40  # the task's own size
