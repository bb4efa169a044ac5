"""Load datasets from JSONL, JSON, CSV and task-set files.

A row is either ``{"id", "input": {...}, "expected", "meta", "split"}`` or flat
(``{"question": ..., "answer": ...}``), in which case ``input_fields`` (default: every
column but the id, expected, split and meta columns) become the input. Rows without a
split column are divided by a seeded shuffle.

A task set is a JSON object ``{"metadata": {name, description, verifier, rubric},
"tasks": [{"id", "input"}], "gold_outputs": ...}`` where the gold outputs are a mapping
``{task_id: output}`` or a list of ``{"task_id", "output"}``.
"""

from __future__ import annotations

import csv
import json
import random
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, model_validator

from emery.core.errors import DataError
from emery.core.files import read_error
from emery.core.models import SPLITS, Dataset, Example, Split
from emery.core.settings import Settings


class FieldMap(Settings):
    """Which columns hold the id, input, gold output and split of a row."""

    id_field: str = "id"
    input_fields: list[str] | None = None
    expected_field: str = "expected"
    split_field: str = "split"
    rationale_field: str | None = None
    """A worked solution or rationale (a column, or ``meta.<key>``): labeled demos show it
    before the gold answer. Stored as the example's ``meta["rationale"]``."""


class SplitFractions(Settings):
    """Shares of train/val/test for a seeded split."""

    train: float = Field(default=0.5, ge=0.0)
    val: float = Field(default=0.25, ge=0.0)
    test: float = Field(default=0.25, ge=0.0)

    @model_validator(mode="after")
    def _positive(self) -> SplitFractions:
        if self.train + self.val + self.test <= 0:
            raise ValueError("split fractions must not all be zero")
        return self


_SPLIT_ALIASES: dict[str, Split] = {
    "train": "train",
    "training": "train",
    "val": "val",
    "valid": "val",
    "validation": "val",
    "dev": "val",
    "test": "test",
    "testing": "test",
}


def load_dataset(
    path: str | Path,
    *,
    fields: FieldMap | None = None,
    fractions: SplitFractions | None = None,
    seed: int = 0,
) -> Dataset:
    """Read ``path`` (``.jsonl``, ``.json`` or ``.csv``) into a Dataset."""
    path = Path(path)
    fields = fields or FieldMap()
    if not path.is_file():
        raise DataError(f"{path}: dataset file not found")
    rows, meta = _read_rows(path)
    examples = [(where, _example(path, where, row, fields)) for where, row in rows]
    if not examples:
        raise DataError(f"{path}: the dataset has no rows")
    _check_unique_ids(path, examples)
    dataset = _divide(examples, fractions or SplitFractions(), seed)
    return dataset.model_copy(
        update={
            "name": meta["name"],
            "description": meta["description"],
            "verifier": meta["verifier"],
        }
    )


def read_rows(path: str | Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The rows of a data file as written (a task set's gold outputs as ``expected``, the
    lists of a ``{"train": [...], ...}`` file marked with ``split``) and the file's name,
    description and suggested verifier; DataError when it cannot be read as one."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: dataset file not found")
    rows, meta = _read_rows(path)
    return [row for _, row in rows], meta


def _read_rows(path: Path) -> tuple[list[tuple[str, dict[str, Any]]], dict[str, Any]]:
    """The rows of ``path`` by its suffix, with where each came from, and the file's meta."""
    suffix = path.suffix.lower()
    meta: dict[str, Any] = {"name": path.stem, "description": "", "verifier": None}
    try:
        if suffix == ".jsonl":
            return list(_jsonl_rows(path)), meta
        if suffix == ".csv":
            return list(_csv_rows(path)), meta
        if suffix == ".json":
            return _json_rows(path, meta)
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(read_error(path, exc)) from None
    except RecursionError:
        raise DataError(f"{path}: nested too deeply") from None
    except csv.Error as exc:
        raise DataError(f"{path}: invalid CSV ({exc})") from None
    raise DataError(f"{path}: unknown dataset format {suffix!r}; use .jsonl, .json or .csv")


def _jsonl_rows(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    with path.open(encoding="utf-8-sig") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"{path}:{number}: invalid JSON ({exc.msg})") from None
            if not isinstance(row, dict):
                raise DataError(f"{path}:{number}: each line must be a JSON object")
            yield f"line {number}", row


def _csv_rows(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    with path.open(encoding="utf-8-sig", newline="") as handle:
        reader = csv.DictReader(handle)
        for number, row in enumerate(reader, start=2):
            if None in row:
                raise DataError(f"{path}:{number}: more values than header columns")
            yield f"line {number}", dict(row)


def _json_rows(
    path: Path, meta: dict[str, Any]
) -> tuple[list[tuple[str, dict[str, Any]]], dict[str, Any]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}:{exc.lineno}: invalid JSON ({exc.msg})") from None
    if isinstance(data, list):
        return _indexed(path, data, "row"), meta
    if not isinstance(data, dict):
        raise DataError(f"{path}: expected a list of rows or an object")
    if "tasks" in data:
        return _task_set(path, data, meta)
    if any(split in data for split in SPLITS):
        rows = []
        for split in SPLITS:
            for where, row in _indexed(path, data.get(split, []), split):
                rows.append((where, {**row, "split": split}))
        return rows, meta
    raise DataError(f"{path}: expected a list of rows, 'train'/'val'/'test' lists, or 'tasks'")


def _indexed(path: Path, rows: Any, label: str) -> list[tuple[str, dict[str, Any]]]:
    if not isinstance(rows, list):
        raise DataError(f"{path}: {label!r} must be a list of rows")
    out = []
    for index, row in enumerate(rows):
        if not isinstance(row, dict):
            raise DataError(f"{path}: {label} {index}: each row must be an object")
        out.append((f"{label} {index}", row))
    return out


def _task_set(
    path: Path, data: dict[str, Any], meta: dict[str, Any]
) -> tuple[list[tuple[str, dict[str, Any]]], dict[str, Any]]:
    """A task set: ``metadata``, ``tasks: [{id, input}]`` and ``gold_outputs`` as a mapping
    ``{task_id: output}`` or a list of ``{task_id, output}`` (see ``task_set_gold``)."""
    tasks = _indexed(path, data["tasks"], "task")
    if not tasks:
        raise DataError(f"{path}: 'tasks' is empty: a task set needs at least one task")
    rows = []
    for where, task in tasks:
        if "id" not in task:
            raise DataError(f"{path}: {where}: field 'id' is required in a task set")
        rows.append((where, task))
    gold = task_set_gold(path, data.get("gold_outputs"), {str(t["id"]) for _, t in rows})
    rows = [
        (where, {**task, "expected": gold.get(str(task["id"]), task.get("expected"))})
        for where, task in rows
    ]
    info = data.get("metadata", {})
    if not isinstance(info, dict):
        raise DataError(f"{path}: 'metadata' must be an object")
    return rows, {
        "name": str(info.get("name", meta["name"])),
        "description": str(info.get("description") or info.get("problem", "")),
        "verifier": _task_set_verifier(path, data.get("verifier"), info),
    }


def task_set_gold(path: Path, gold: Any, task_ids: set[str]) -> dict[str, Any]:
    """A task set's gold outputs by task id, from either form; a gold output for a task the
    set does not have, or given twice, is an error."""
    if gold is None:
        return {}
    if isinstance(gold, dict):
        pairs = [
            (str(task_id), output, f"gold_outputs[{task_id!r}]") for task_id, output in gold.items()
        ]
    elif isinstance(gold, list):
        pairs = []
        for index, entry in enumerate(gold):
            if not isinstance(entry, dict) or "task_id" not in entry or "output" not in entry:
                raise DataError(
                    f"{path}: gold_outputs {index}: each entry must be an object with"
                    " 'task_id' and 'output'"
                )
            pairs.append((str(entry["task_id"]), entry["output"], f"gold_outputs {index}"))
    else:
        raise DataError(
            f"{path}: 'gold_outputs' must map task ids to outputs or list"
            " {task_id, output} objects"
        )
    found: dict[str, Any] = {}
    for task_id, output, where in pairs:
        if task_id not in task_ids:
            raise DataError(f"{path}: {where}: unknown task_id {task_id!r} (no task has that id)")
        if task_id in found:
            raise DataError(f"{path}: {where}: task {task_id!r} already has a gold output")
        found[task_id] = output
    return found


def _task_set_verifier(path: Path, verifier: Any, info: dict[str, Any]) -> dict[str, Any] | None:
    """The suggested verifier: ``verifier``, else ``metadata.verifier`` (or
    ``default_verifier``; a kind name or an object), else a rubric verifier when
    ``metadata.rubric`` lists criteria, which also fill a rubric verifier given without."""
    if verifier is not None and not isinstance(verifier, dict):
        raise DataError(f"{path}: 'verifier' must be an object")
    if verifier is None:
        suggested = info.get("verifier", info.get("default_verifier"))
        if isinstance(suggested, str):
            suggested = {"kind": suggested}
        elif suggested is not None and not isinstance(suggested, dict):
            raise DataError(f"{path}: 'metadata.verifier' must be a verifier kind or an object")
        verifier = suggested
    chosen: dict[str, Any] | None = verifier
    rubric = info.get("rubric")
    if rubric is None:
        return chosen
    if not isinstance(rubric, list) or not rubric:
        raise DataError(f"{path}: 'metadata.rubric' must be a non-empty list of criteria")
    criteria = [{"name": item} if isinstance(item, str) else item for item in rubric]
    if chosen is None:
        return {"kind": "rubric", "criteria": criteria}
    if chosen.get("kind") == "rubric" and not chosen.get("criteria"):
        return {**chosen, "criteria": criteria}
    return chosen


def _example(
    path: Path, where: str, row: dict[str, Any], fields: FieldMap
) -> tuple[Split | None, Example]:
    split = _split_of(path, where, row.get(fields.split_field))
    reserved = {fields.id_field, fields.expected_field, fields.split_field, "meta", "input"}
    reserved |= {fields.rationale_field} if fields.rationale_field else set()
    if "input" in row and fields.input_fields is None:
        inputs = row["input"]
        if not isinstance(inputs, dict):
            raise DataError(f"{path}: {where}: field 'input' must be an object")
    else:
        names = fields.input_fields or [key for key in row if key not in reserved]
        missing = [name for name in names if name not in row]
        if missing:
            raise DataError(f"{path}: {where}: input field {missing[0]!r} is missing")
        inputs = {name: row[name] for name in names}
    if not inputs:
        raise DataError(f"{path}: {where}: the row has no input fields")
    meta = row.get("meta", {})
    if not isinstance(meta, dict):
        raise DataError(f"{path}: {where}: field 'meta' must be an object")
    if fields.rationale_field:
        meta = {**meta, "rationale": _rationale(path, where, row, meta, fields.rationale_field)}
    raw_id = row.get(fields.id_field, where.replace(" ", "-"))
    try:
        example = Example(
            id=str(raw_id), input=inputs, expected=row.get(fields.expected_field), meta=meta
        )
    except ValidationError as exc:
        raise DataError(f"{path}: {where}: {exc.errors()[0]['msg']}") from None
    return split, example


def _rationale(path: Path, where: str, row: dict[str, Any], meta: dict[str, Any], name: str) -> str:
    source, key = (meta, name.removeprefix("meta.")) if name.startswith("meta.") else (row, name)
    value = source.get(key)
    if value is None or not str(value).strip():
        raise DataError(f"{path}: {where}: rationale field {name!r} is missing or empty")
    return str(value)


def _split_of(path: Path, where: str, value: Any) -> Split | None:
    if value is None or value == "":
        return None
    split = _SPLIT_ALIASES.get(str(value).strip().lower())
    if split is None:
        raise DataError(f"{path}: {where}: field 'split' is {value!r}; use train, val or test")
    return split


def _check_unique_ids(
    path: Path, examples: Iterable[tuple[str, tuple[Split | None, Example]]]
) -> None:
    seen: dict[str, str] = {}
    for where, (_, example) in examples:
        if example.id in seen:
            raise DataError(f"{path}: {where}: id {example.id!r} repeats {seen[example.id]}")
        seen[example.id] = where


def _divide(
    examples: list[tuple[str, tuple[Split | None, Example]]], fractions: SplitFractions, seed: int
) -> Dataset:
    by_split: dict[Split, list[Example]] = {split: [] for split in SPLITS}
    unassigned = []
    for _, (split, example) in examples:
        if split is None:
            unassigned.append(example)
        else:
            by_split[split].append(example)
    if unassigned:
        for split, share in seeded_split(unassigned, fractions, seed).items():
            by_split[split].extend(share)
    return Dataset(train=by_split["train"], val=by_split["val"], test=by_split["test"])


def seeded_split(
    examples: list[Example], fractions: SplitFractions, seed: int
) -> dict[Split, list[Example]]:
    """Shuffle with ``seed`` and cut by ``fractions`` (normalized to sum to one)."""
    shuffled = list(examples)
    random.Random(seed).shuffle(shuffled)
    total = fractions.train + fractions.val + fractions.test
    n_train = round(len(shuffled) * fractions.train / total)
    n_val = round(len(shuffled) * fractions.val / total)
    return {
        "train": shuffled[:n_train],
        "val": shuffled[n_train : n_train + n_val],
        "test": shuffled[n_train + n_val :],
    }
