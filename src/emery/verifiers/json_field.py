"""Structured outputs: compare fields of a JSON object with the expected object."""

from __future__ import annotations

import json
import re
from typing import Any

from emery.core.models import Example
from emery.verifiers.base import SyncVerifier, Verdict, clip
from emery.verifiers.text import normalize

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def extract_json(value: Any) -> Any:
    """A JSON value from an output: parsed already, in a fenced block, or the first {...}."""
    if not isinstance(value, str):
        return value
    fenced = _FENCE.search(value)
    candidates = [fenced.group(1)] if fenced else []
    candidates.append(value)
    start, end = value.find("{"), value.rfind("}")
    if 0 <= start < end:
        candidates.append(value[start : end + 1])
    for text in candidates:
        try:
            return json.loads(text.strip())
        except ValueError:
            continue
    raise ValueError(f"no JSON object in {clip(value)!r}")


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, int | float) and isinstance(b, int | float):
        return float(a) == float(b)
    if isinstance(a, str) or isinstance(b, str):
        return normalize(str(a)) == normalize(str(b))
    return bool(a == b)


class JsonFieldMatch(SyncVerifier):
    """The fraction of ``fields`` (default: every expected key) whose values match."""

    needs_expected = True

    def __init__(self, fields: list[str] | None = None) -> None:
        self.fields = fields

    def check(self, example: Example, output: Any) -> Verdict:
        expected = extract_json(example.expected)
        if not isinstance(expected, dict):
            raise ValueError(f"example {example.id}: expected value is not a JSON object")
        try:
            got = extract_json(output)
        except ValueError as exc:
            return Verdict(score=0.0, feedback=f"The output must be a JSON object: {exc}.")
        if not isinstance(got, dict):
            return Verdict(
                score=0.0,
                feedback=f"The output must be a JSON object, not {clip(json.dumps(got))}.",
            )
        fields = self.fields or sorted(expected)
        wrong = [f for f in fields if f not in got or not _same(got[f], expected.get(f))]
        score = (len(fields) - len(wrong)) / len(fields) if fields else 1.0
        if not wrong:
            return Verdict(score=score, feedback="Correct: every field matches.")
        details = "; ".join(
            f"{f}: expected {json.dumps(expected.get(f))}, got "
            + (json.dumps(got[f]) if f in got else "nothing")
            for f in wrong
        )
        return Verdict(
            score=score, feedback=f"{len(wrong)} of {len(fields)} fields wrong ({details})."
        )
