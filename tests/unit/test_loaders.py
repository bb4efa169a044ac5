"""Dataset files: JSONL, CSV, JSON lists, split objects and task sets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from emery.core.errors import DataError
from emery.core.models import Dataset
from emery.data import FieldMap, SplitFractions, load_dataset


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def ids(dataset: Dataset) -> dict[str, list[str]]:
    return {split: [e.id for e in dataset.split(split)] for split in ("train", "val", "test")}


def all_ids(dataset: Dataset) -> list[str]:
    return sorted(e.id for e in dataset)


def test_jsonl_with_input_dicts(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "qa.jsonl",
        [
            {"id": "a", "input": {"question": "1+1"}, "expected": "2", "meta": {"src": "x"}},
            {"id": "b", "input": {"question": "2+2"}, "expected": "4"},
        ],
    )
    dataset = load_dataset(path, fractions=SplitFractions(train=1, val=0, test=0))
    assert dataset.name == "qa"
    assert all_ids(dataset) == ["a", "b"]
    a = next(e for e in dataset if e.id == "a")
    assert a.input == {"question": "1+1"}
    assert a.expected == "2"
    assert a.meta == {"src": "x"}


def test_jsonl_flat_rows_use_every_other_column_as_input(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "flat.jsonl",
        [{"id": 1, "question": "q1", "context": "c1", "expected": 5, "split": "test"}],
    )
    (example,) = load_dataset(path).test
    assert example.id == "1"
    assert example.input == {"question": "q1", "context": "c1"}
    assert example.expected == 5


def test_jsonl_skips_blank_lines_and_defaults_ids(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text('{"q": "x"}\n\n{"q": "y"}\n')
    dataset = load_dataset(path, fractions=SplitFractions(train=1, val=0, test=0))
    assert all_ids(dataset) == ["line-1", "line-3"]


def test_input_fields_and_custom_columns(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "d.jsonl",
        [{"key": "k1", "question": "q", "noise": "n", "answer": "a", "part": "dev"}],
    )
    fields = FieldMap(
        id_field="key", input_fields=["question"], expected_field="answer", split_field="part"
    )
    dataset = load_dataset(path, fields=fields)
    (example,) = dataset.val
    assert (example.id, example.input, example.expected) == ("k1", {"question": "q"}, "a")


def test_input_fields_override_an_input_column(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "d.jsonl", [{"input": "raw text", "label": "x", "split": "train"}]
    )
    (example,) = load_dataset(
        path, fields=FieldMap(input_fields=["input"], expected_field="label")
    ).train
    assert example.input == {"input": "raw text"}
    assert example.expected == "x"


def test_csv(tmp_path: Path) -> None:
    path = tmp_path / "data.csv"
    path.write_text("id,question,expected,split\nr1,What?,yes,train\nr2,Why?,no,test\n")
    dataset = load_dataset(path)
    assert ids(dataset) == {"train": ["r1"], "val": [], "test": ["r2"]}
    assert dataset.train[0].input == {"question": "What?"}
    assert dataset.train[0].expected == "yes"


def test_csv_row_with_too_many_values_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "data.csv"
    path.write_text("question,expected\nq1,a1\nq2,a2,extra\n")
    with pytest.raises(DataError, match=r"data\.csv:3: more values"):
        load_dataset(path)


def test_json_list(tmp_path: Path) -> None:
    path = tmp_path / "rows.json"
    path.write_text(json.dumps([{"q": "a", "expected": 1}, {"q": "b", "expected": 2}]))
    dataset = load_dataset(path, fractions=SplitFractions(train=0, val=0, test=1))
    assert sorted(e.id for e in dataset.test) == ["row-0", "row-1"]


def test_json_split_object(tmp_path: Path) -> None:
    path = tmp_path / "splits.json"
    path.write_text(
        json.dumps(
            {
                "train": [{"id": "t1", "q": "a"}, {"id": "t2", "q": "b"}],
                "test": [{"id": "s1", "q": "c"}],
            }
        )
    )
    assert ids(load_dataset(path)) == {"train": ["t1", "t2"], "val": [], "test": ["s1"]}


def test_json_task_set(tmp_path: Path) -> None:
    path = tmp_path / "taskset.json"
    path.write_text(
        json.dumps(
            {
                "metadata": {"name": "capitals", "description": "Name the capital."},
                "verifier": {"kind": "normalized"},
                "tasks": [
                    {"id": "fr", "input": {"country": "France"}, "split": "train"},
                    {"id": "jp", "input": {"country": "Japan"}, "expected": "Tokyo"},
                    {"id": 7, "input": {"country": "Peru"}},
                ],
                "gold_outputs": {"fr": "Paris", "7": "Lima"},
            }
        )
    )
    dataset = load_dataset(path, fractions=SplitFractions(train=0, val=0, test=1))
    assert dataset.name == "capitals"
    assert dataset.description == "Name the capital."
    assert dataset.verifier == {"kind": "normalized"}
    expected = {e.id: e.expected for e in dataset}
    assert expected == {"fr": "Paris", "jp": "Tokyo", "7": "Lima"}
    assert [e.id for e in dataset.train] == ["fr"]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"tasks": [{"input": {"q": 1}}]}, r"task 0: field 'id' is required"),
        ({"tasks": [{"id": "a", "q": 1}], "gold_outputs": 3}, "'gold_outputs' must map"),
        ({"tasks": [{"id": "a", "q": 1}], "metadata": "x"}, "'metadata' must be an object"),
        ({"tasks": [{"id": "a", "q": 1}], "verifier": "exact"}, "'verifier' must be an object"),
        ({"tasks": "nope"}, "'task' must be a list"),
        ({"rows": []}, "expected a list of rows"),
        ("just a string", "expected a list of rows or an object"),
        ([1, 2], r"row 0: each row must be an object"),
    ],
)
def test_json_shape_errors(tmp_path: Path, data: Any, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(DataError, match=message) as info:
        load_dataset(path)
    assert "bad.json" in str(info.value)


def test_explicit_split_aliases(tmp_path: Path) -> None:
    rows = [
        {"id": str(i), "q": "x", "split": split}
        for i, split in enumerate(["Training", "dev", "validation", "TEST ", "testing", "train"])
    ]
    dataset = load_dataset(write_jsonl(tmp_path / "d.jsonl", rows))
    assert ids(dataset) == {"train": ["0", "5"], "val": ["1", "2"], "test": ["3", "4"]}


def test_rows_without_split_are_divided_by_seed(tmp_path: Path) -> None:
    rows = [{"id": f"e{i:02d}", "q": i} for i in range(20)]
    rows.append({"id": "pinned", "q": 99, "split": "test"})
    path = write_jsonl(tmp_path / "d.jsonl", rows)
    first = load_dataset(path, seed=3)
    again = load_dataset(path, seed=3)
    other = load_dataset(path, seed=4)
    assert ids(first) == ids(again)
    assert ids(first) != ids(other)
    assert all_ids(first) == sorted(str(r["id"]) for r in rows)
    assert len(set(all_ids(first))) == 21
    assert first.sizes() == {"train": 10, "val": 5, "test": 6}
    assert "pinned" in ids(first)["test"]


def test_split_fractions_are_normalized(tmp_path: Path) -> None:
    rows = [{"id": str(i), "q": i} for i in range(10)]
    dataset = load_dataset(
        write_jsonl(tmp_path / "d.jsonl", rows), fractions=SplitFractions(train=6, val=2, test=2)
    )
    assert dataset.sizes() == {"train": 6, "val": 2, "test": 2}
    with pytest.raises(ValueError, match="must not all be zero"):
        SplitFractions(train=0, val=0, test=0)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"absent\.jsonl: dataset file not found"):
        load_dataset(tmp_path / "absent.jsonl")


def test_unknown_format(tmp_path: Path) -> None:
    path = tmp_path / "data.txt"
    path.write_text("x")
    with pytest.raises(DataError, match=r"unknown dataset format '\.txt'"):
        load_dataset(path)


def test_bad_json_line_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text('{"q": 1}\n{"q": 2}\n{"q": oops}\n')
    with pytest.raises(DataError, match=r"d\.jsonl:3: invalid JSON"):
        load_dataset(path)


def test_bad_json_file_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "d.json"
    path.write_text('[\n{"q": 1},\n{"q": }\n]')
    with pytest.raises(DataError, match=r"d\.json:3: invalid JSON"):
        load_dataset(path)


def test_non_object_row(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text('{"q": 1}\n[1, 2]\n')
    with pytest.raises(DataError, match=r"d\.jsonl:2: each line must be a JSON object"):
        load_dataset(path)


def test_bad_split_value(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "d.jsonl", [{"q": 1, "split": "train"}, {"q": 2, "split": "hold"}]
    )
    with pytest.raises(DataError, match=r"d\.jsonl: line 2: field 'split' is 'hold'"):
        load_dataset(path)


def test_duplicate_ids(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "d.jsonl", [{"id": "a", "q": 1}, {"id": "b", "q": 2}, {"id": "a", "q": 3}]
    )
    with pytest.raises(DataError, match=r"line 3: id 'a' repeats line 1"):
        load_dataset(path)


def test_missing_input_field(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "d.jsonl", [{"question": "q", "context": "c"}, {"question": "q2"}]
    )
    with pytest.raises(DataError, match=r"line 2: input field 'context' is missing"):
        load_dataset(path, fields=FieldMap(input_fields=["question", "context"]))


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"id": "a", "input": "text"}, "field 'input' must be an object"),
        ({"id": "a", "expected": 1}, "the row has no input fields"),
        ({"id": "a", "q": 1, "meta": [1]}, "field 'meta' must be an object"),
    ],
)
def test_bad_row_shapes(tmp_path: Path, row: dict[str, Any], message: str) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", [row])
    with pytest.raises(DataError, match=rf"d\.jsonl: line 1: {message}"):
        load_dataset(path)


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text("\n")
    with pytest.raises(DataError, match="has no rows"):
        load_dataset(path)
