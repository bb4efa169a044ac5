"""Verifiers that compare text: exact, normalized, contains, regex and token F1."""

from __future__ import annotations

import re
import string
from collections import Counter
from typing import Any

from emery.core.models import Example
from emery.verifiers.base import SyncVerifier, Verdict, as_text, clip

_PUNCT = re.compile(f"[{re.escape(string.punctuation)}]")
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize(text: str) -> str:
    """Lowercase, drop punctuation and articles, collapse whitespace."""
    text = _PUNCT.sub(" ", text.lower())
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


class ExactMatch(SyncVerifier):
    """The output, stripped, equals the expected value as text."""

    needs_expected = True

    def check(self, example: Example, output: Any) -> Verdict:
        expected, got = as_text(example.expected).strip(), as_text(output).strip()
        if got == expected:
            return Verdict(score=1.0, feedback=f"Correct: {clip(expected)!r}.")
        return Verdict(
            score=0.0, feedback=f"Expected exactly {clip(expected)!r} but got {clip(got)!r}."
        )


class NormalizedMatch(SyncVerifier):
    """Equal after lowercasing and removing punctuation, articles and extra spaces."""

    needs_expected = True

    def check(self, example: Example, output: Any) -> Verdict:
        expected, got = as_text(example.expected), as_text(output)
        if normalize(got) == normalize(expected):
            return Verdict(score=1.0, feedback=f"Correct: {clip(expected)!r}.")
        return Verdict(score=0.0, feedback=f"Expected {clip(expected)!r} but got {clip(got)!r}.")


class Contains(SyncVerifier):
    """The expected text appears in the output."""

    needs_expected = True

    def __init__(self, case_sensitive: bool = False) -> None:
        self.case_sensitive = case_sensitive

    def check(self, example: Example, output: Any) -> Verdict:
        expected, got = as_text(example.expected), as_text(output)
        found = expected in got if self.case_sensitive else expected.lower() in got.lower()
        if found:
            return Verdict(score=1.0, feedback=f"Correct: the output contains {clip(expected)!r}.")
        return Verdict(
            score=0.0,
            feedback=f"The output should contain {clip(expected)!r} but was {clip(got)!r}.",
        )


class RegexMatch(SyncVerifier):
    """The output matches ``pattern``; ``{expected}`` in it stands for the escaped gold value."""

    def __init__(self, pattern: str, full: bool = False, ignore_case: bool = False) -> None:
        self.pattern = pattern
        self.needs_expected = "{expected}" in pattern
        self.full = full
        self.flags = re.IGNORECASE if ignore_case else 0
        re.compile(pattern.replace("{expected}", "x"), self.flags)

    def check(self, example: Example, output: Any) -> Verdict:
        pattern = self.pattern.replace("{expected}", re.escape(as_text(example.expected)))
        got = as_text(output)
        match = (re.fullmatch if self.full else re.search)(pattern, got, self.flags)
        if match:
            return Verdict(score=1.0, feedback=f"Correct: the output matches {pattern!r}.")
        return Verdict(
            score=0.0, feedback=f"The output should match {pattern!r} but was {clip(got)!r}."
        )


class TokenF1(SyncVerifier):
    """Token-level F1 between the normalized output and expected text."""

    needs_expected = True

    def check(self, example: Example, output: Any) -> Verdict:
        expected = normalize(as_text(example.expected)).split()
        got = normalize(as_text(output)).split()
        common = sum((Counter(expected) & Counter(got)).values())
        if not expected and not got:
            return Verdict(score=1.0, feedback="Correct: both empty.")
        if common == 0:
            return Verdict(
                score=0.0,
                feedback=f"No words in common with the expected {clip(' '.join(expected))!r}.",
            )
        precision, recall = common / len(got), common / len(expected)
        f1 = 2 * precision * recall / (precision + recall)
        missing = list((Counter(expected) - Counter(got)).elements())
        extra = list((Counter(got) - Counter(expected)).elements())
        parts = [f"Token F1 {f1:.2f} against {clip(' '.join(expected))!r}"]
        if missing:
            parts.append(f"missing {clip(' '.join(missing), 60)!r}")
        if extra:
            parts.append(f"extra {clip(' '.join(extra), 60)!r}")
        return Verdict(score=f1, feedback="; ".join(parts) + ".")
