"""What a data file holds, as far as rows tell: its columns, which one is likely the gold
output, what kind of answer that is, and whether the file says the splits (for
``emery init``)."""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from emery.core.errors import DataError
from emery.data.loaders import FieldMap, load_dataset, read_rows

OUTPUT_NAMES = (
    "expected",
    "answer",
    "output",
    "label",
    "target",
    "gold",
    "response",
    "completion",
    "result",
    "solution",
    "class",
    "category",
    "intent",
    "sentiment",
    "y",
)
"""Column names taken for the gold output, most likely first."""
NOT_INPUT = frozenset({"id", "split", "meta"})
MAX_LABELS = 20
MAX_LABEL_CHARS = 40

AnswerKind = Literal["numeric", "labels", "json", "text", "none"]


@dataclass(frozen=True)
class Answers:
    """The kind of the gold outputs: numbers, a small set of labels, JSON objects (with the
    keys every one has), free text, or none at all."""

    kind: AnswerKind
    labels: tuple[str, ...] = ()
    keys: tuple[str, ...] = ()


@dataclass(frozen=True)
class DataProfile:
    """A data file's rows, read for a first config."""

    path: Path
    name: str
    description: str
    rows: int
    structured: bool
    """Rows hold their inputs in an ``input`` object (``{"id", "input", "expected"}``)."""
    columns: tuple[str, ...]
    """The input columns and the candidates for the gold output, in file order."""
    output: str | None
    """The gold output's column when a row or a known name says it; None: ask."""
    splits: dict[str, int] | None
    """Rows per split the file names (rows without one are divided by the seed)."""
    verifier: dict[str, Any] | None
    records: tuple[dict[str, Any], ...] = field(repr=False, compare=False)
    """The rows as read (``read_rows``)."""

    def inputs(self, output: str) -> list[str]:
        """The input columns when ``output`` holds the gold answer."""
        return [name for name in self.columns if name != output]

    def answers(self, output: str) -> Answers:
        """What the gold outputs in column ``output`` look like."""
        return classify_answers([row.get(output) for row in self.records])

    def check(self, output: str) -> None:
        """Load the file as the config will (DataError naming the first bad row)."""
        if self.structured:
            load_dataset(self.path)
        else:
            load_dataset(
                self.path, fields=FieldMap(expected_field=output, input_fields=self.inputs(output))
            )


def profile(path: Path) -> DataProfile:
    """Read ``path``'s rows (DataError when it is missing, empty or unreadable)."""
    rows, meta = read_rows(path)
    if not rows:
        raise DataError(f"{path}: the dataset has no rows")
    structured = all(isinstance(row.get("input"), dict) for row in rows)
    if structured:
        columns = _ordered(key for row in rows for key in row["input"])
        output: str | None = "expected"
    else:
        columns = _ordered(key for row in rows for key in row if key not in NOT_INPUT)
        output = next((name for name in OUTPUT_NAMES if name in columns), None)
        if len(columns) < 2 and output is None:
            raise DataError(f"{path}: the rows need an input column and a gold output column")
    if "expected" in {key for row in rows for key in row}:
        output = "expected"
        columns = (*(name for name in columns if name != "expected"), "expected")
    marked = Counter(str(row["split"]) for row in rows if row.get("split") not in (None, ""))
    return DataProfile(
        path=path,
        name=str(meta["name"]),
        description=str(meta["description"]),
        rows=len(rows),
        structured=structured,
        columns=columns,
        output=output,
        splits=dict(marked) or None,
        verifier=meta["verifier"],
        records=tuple(rows),
    )


def _ordered(names: Any) -> tuple[str, ...]:
    return tuple(dict.fromkeys(str(name) for name in names))


def classify_answers(values: Sequence[Any]) -> Answers:
    """Numbers → numeric; JSON objects → json; few short distinct strings → labels; other
    text → text; no value at all → none."""
    given = [value for value in values if value is not None and value != ""]
    if not given:
        return Answers("none")
    objects = [_as_object(value) for value in given]
    if all(item is not None for item in objects):
        shared = set.intersection(*(set(item) for item in objects if item is not None))
        first = objects[0] or {}
        return Answers("json", keys=tuple(key for key in first if key in shared))
    if all(_is_number(value) for value in given):
        return Answers("numeric")
    texts = [str(value).strip() for value in given]
    distinct = sorted(set(texts))
    few = len(distinct) <= MAX_LABELS and len(distinct) < max(2, len(texts) * 0.7)
    if few and all(len(text) <= MAX_LABEL_CHARS for text in distinct):
        return Answers("labels", labels=tuple(distinct))
    return Answers("text")


def _as_object(value: Any) -> dict[str, Any] | None:
    if isinstance(value, dict):
        return value
    if isinstance(value, str) and value.strip().startswith("{"):
        try:
            parsed = json.loads(value)
        except ValueError:
            return None
        return parsed if isinstance(parsed, dict) else None
    return None


def _is_number(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return math.isfinite(value)
    try:
        number = float(str(value).replace(",", "").strip())
    except ValueError:
        return False
    return math.isfinite(number)
