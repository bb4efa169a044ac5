"""Numeric answers: the last number in the output against the expected value."""

from __future__ import annotations

import math
import re
from typing import Any

from emery.core.models import Example
from emery.verifiers.base import SyncVerifier, Verdict, as_text, clip

_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?|-?\.\d+")


def last_number(text: str) -> float | None:
    """The last number written in ``text`` (thousands separators and $ allowed), or None."""
    for token in reversed(_NUMBER.findall(text)):
        cleaned = token.replace(",", "")
        try:
            return float(cleaned)
        except ValueError:
            continue
    return None


def format_number(value: float) -> str:
    return str(int(value)) if value.is_integer() else f"{value:g}"


class NumericMatch(SyncVerifier):
    """Score 1 when the last number in the output is within tolerance of the expected one."""

    needs_expected = True

    def __init__(self, abs_tol: float = 1e-6, rel_tol: float = 0.0) -> None:
        self.abs_tol = abs_tol
        self.rel_tol = rel_tol

    def check(self, example: Example, output: Any) -> Verdict:
        expected = last_number(as_text(example.expected))
        if expected is None:
            raise ValueError(
                f"example {example.id}: expected value {example.expected!r} is not a number"
            )
        text = as_text(output)
        got = last_number(text)
        want = format_number(expected)
        if got is None:
            return Verdict(
                score=0.0,
                feedback=f"Expected the number {want} but the output has none: {clip(text)!r}.",
            )
        if math.isclose(got, expected, abs_tol=self.abs_tol, rel_tol=self.rel_tol):
            return Verdict(score=1.0, feedback=f"Correct: {want}.")
        return Verdict(
            score=0.0,
            feedback=(
                f"Expected {want} but the output's final number was {format_number(got)}"
                f" in {clip(text)!r}."
            ),
        )
