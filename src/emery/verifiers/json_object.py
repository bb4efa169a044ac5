"""Structured outputs: a reply's JSON object against the expected object, key by key.

Two ways to match (``[verifier] kind = "json_object"``, ``match``):

- ``f1`` (default): key–value precision, recall and F1 after light normalisation. Keys
  and string values are case-folded, stripped of surrounding whitespace and sentence
  punctuation, quotes and brackets (``.,;:!?'"`` ``` ` ``` ``()[]{}<>``, typographic quotes,
  ``…``; signs and symbols such as ``-``, ``$``, ``%`` stay) and their inner whitespace
  collapsed. Numbers, booleans and null are compared as their JSON text normalised the
  same way (``3`` matches ``"3"``); nested objects and lists as compact JSON text with
  sorted keys, after normalising every key and string inside them. A pair is right when
  its key is expected and its value matches. Precision is right pairs over the reply's
  keys, recall right pairs over the expected keys; an empty side counts as 1 (nothing
  extra or nothing missed), so ``{}`` against ``{}`` scores 1, and anything against
  ``{}`` scores 0. A reply that repeats a key after normalisation keeps its last value.
- ``exact``: 1 when the parsed objects are equal (keys as written, values as canonical
  JSON text: ``3`` is not ``"3"`` nor ``3.0``), else 0.

The output is read as a stage's ``json_object`` parser reads a reply (``json_reply``)
unless it is an object already; an unreadable output scores 0 and says why. The feedback
names the missing keys, the extra keys and the wrong values (expected and got), which is
what a reflective search shows its proposer.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from emery.core.models import Example
from emery.verifiers.base import SyncVerifier, Verdict, clip
from emery.verifiers.json_reply import read_json_object

JsonMatch = Literal["f1", "exact"]
_STRIPPED = ".,;:!?'\"`()[]{}<>\u2018\u2019\u201c\u201d\u00ab\u00bb\u2026"


def normalize_text(text: str) -> str:
    """Case-folded, surrounding whitespace and punctuation stripped, inner whitespace
    collapsed (see the module docstring for which punctuation)."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(folded.split()).strip(_STRIPPED + " ").strip()


def _normalized_tree(value: Any) -> Any:
    if isinstance(value, str):
        return normalize_text(value)
    if isinstance(value, dict):
        return {normalize_text(str(k)): _normalized_tree(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalized_tree(item) for item in value]
    return value


def normalized_value(value: Any) -> str:
    """A value as the ``f1`` match compares it (see the module docstring)."""
    if isinstance(value, str):
        return normalize_text(value)
    if isinstance(value, dict | list):
        return _canonical(_normalized_tree(value))
    return normalize_text(_canonical(value))


def _canonical(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class Comparison:
    """How keys and values are made comparable: the strategy a ``match`` names."""

    key: Callable[[str], str]
    value: Callable[[Any], str]


COMPARISONS: dict[JsonMatch, Comparison] = {
    "f1": Comparison(key=normalize_text, value=normalized_value),
    "exact": Comparison(key=lambda key: key, value=_canonical),
}


@dataclass
class KeyDiff:
    """A reply's object against the expected one: keys as the expected object writes them
    (the reply's spelling for extra keys)."""

    right: list[str] = field(default_factory=list)
    wrong: list[tuple[str, Any, Any]] = field(default_factory=list)
    missing: list[tuple[str, Any]] = field(default_factory=list)
    extra: list[tuple[str, Any]] = field(default_factory=list)

    @classmethod
    def of(cls, expected: dict[str, Any], got: dict[str, Any], how: Comparison) -> KeyDiff:
        diff = cls()
        replied = {how.key(str(k)): (str(k), v) for k, v in got.items()}
        wanted = {how.key(str(k)) for k in expected}
        for key, value in expected.items():
            found = replied.get(how.key(str(key)))
            if found is None:
                diff.missing.append((str(key), value))
            elif how.value(found[1]) == how.value(value):
                diff.right.append(str(key))
            else:
                diff.wrong.append((str(key), value, found[1]))
        diff.extra = [(k, v) for norm, (k, v) in replied.items() if norm not in wanted]
        return diff

    @property
    def replied(self) -> int:
        return len(self.right) + len(self.wrong) + len(self.extra)

    @property
    def expected(self) -> int:
        return len(self.right) + len(self.wrong) + len(self.missing)

    def precision(self) -> float:
        """Right pairs over the reply's keys; 1 for an empty reply (nothing extra)."""
        return len(self.right) / self.replied if self.replied else 1.0

    def recall(self) -> float:
        """Right pairs over the expected keys; 1 when none are expected (nothing missed)."""
        return len(self.right) / self.expected if self.expected else 1.0

    def f1(self) -> float:
        precision, recall = self.precision(), self.recall()
        return 2 * precision * recall / (precision + recall) if precision + recall else 0.0

    def problems(self) -> str:
        """The missing keys, extra keys and wrong values, in words."""
        parts = []
        if self.missing:
            keys = ", ".join(f"{_show(k)} (expected {_show(v)})" for k, v in self.missing)
            parts.append(f"missing keys: {keys}")
        if self.extra:
            keys = ", ".join(f"{_show(k)} (= {_show(v)})" for k, v in self.extra)
            parts.append(f"extra keys: {keys}")
        if self.wrong:
            values = ", ".join(
                f"{_show(k)} expected {_show(want)} but got {_show(got)}"
                for k, want, got in self.wrong
            )
            parts.append(f"wrong values: {values}")
        return "; ".join(parts)


def _show(value: Any) -> str:
    return clip(json.dumps(value, ensure_ascii=False), 60)


def expected_object(example: Example) -> dict[str, Any]:
    """The example's gold object: a dict, or a JSON string holding one."""
    expected = example.expected
    if isinstance(expected, str):
        try:
            expected = json.loads(expected)
        except ValueError:
            raise ValueError(
                f"example {example.id}: expected value {clip(example.expected)!r} is not JSON"
            ) from None
    if not isinstance(expected, dict):
        raise ValueError(f"example {example.id}: expected value is not a JSON object")
    return expected


def replied_object(output: Any) -> dict[str, Any]:
    """The output as an object: a dict as it is, text read by ``read_json_object``."""
    if isinstance(output, dict):
        return output
    if isinstance(output, str):
        return read_json_object(output)
    shown = "nothing" if output is None else f"a {type(output).__name__}"
    raise ValueError(f"the output is {shown}, not a JSON object: {clip(json.dumps(output))}")


class JsonObjectMatch(SyncVerifier):
    """Scores a reply's JSON object against the expected one (see the module docstring)."""

    needs_expected = True

    def __init__(self, match: JsonMatch = "f1") -> None:
        self.match = match

    def check(self, example: Example, output: Any) -> Verdict:
        expected = expected_object(example)
        want = _show_object(expected)
        try:
            got = replied_object(output)
        except ValueError as exc:
            return Verdict(
                score=0.0, feedback=f"The reply must be a JSON object like {want}: {exc}."
            )
        diff = KeyDiff.of(expected, got, COMPARISONS[self.match])
        problems = diff.problems()
        if self.match == "exact":
            if not problems:
                return Verdict(score=1.0, feedback=f"Correct: exactly {want}.")
            return Verdict(score=0.0, feedback=f"Expected exactly {want}; {problems}.")
        score = diff.f1()
        if not problems:
            return Verdict(score=score, feedback=f"Correct: every key and value of {want}.")
        return Verdict(
            score=score,
            feedback=(
                f"Key-value F1 {score:.2f} (precision {diff.precision():.2f}, recall "
                f"{diff.recall():.2f}) against {want}; {problems}."
            ),
        )


def _show_object(value: dict[str, Any]) -> str:
    return clip(json.dumps(value, ensure_ascii=False), 200)
