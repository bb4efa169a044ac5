"""emery's reply parsers and text/numeric verifiers, standard library only, for peer scripts.

A peer runs in its own venv without emery, yet must score replies exactly as emery's job
does: ``parse`` mirrors ``emery.systems.parsers.ParserConfig.parse`` (raw, last_line,
regex) and ``verify`` mirrors the exact, normalized and numeric verifiers, with
the same feedback texts. The spec's ``parser`` and ``verifier`` are the job's configs as
JSON (``model_dump``).
"""

from __future__ import annotations

import math
import re
import string
from typing import Any

NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?|-?\.\d+")
PUNCT = re.compile(f"[{re.escape(string.punctuation)}]")
ARTICLES = re.compile(r"\b(a|an|the)\b")


def clip(text: str, limit: int = 120) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def parse(parser: dict[str, Any], text: str) -> str:
    """The stage's output read from ``text``; ValueError with emery's message if it has none."""
    kind = parser.get("kind", "raw")
    if kind == "raw":
        return text.strip()
    if kind == "last_line":
        lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
        if not lines:
            raise ValueError("the reply is empty")
        return lines[-1]
    if kind == "regex":
        flags = re.IGNORECASE | re.DOTALL if parser.get("ignore_case", True) else re.DOTALL
        found = list(re.finditer(parser["pattern"], text, flags))
        if not found:
            raise ValueError(
                f"the reply must match the pattern {parser['pattern']!r} but was {clip(text)!r}"
            )
        last = found[-1]
        return (last.group(1) if last.groups() else last.group(0)).strip()
    raise ValueError(f"parser kind {kind!r} is not supported by the peer scripts")


def normalize(text: str) -> str:
    """Lowercase, drop punctuation and articles, collapse whitespace (as emery does)."""
    return " ".join(ARTICLES.sub(" ", PUNCT.sub(" ", text.lower())).split())


def last_number(text: str) -> float | None:
    for token in reversed(NUMBER.findall(text)):
        try:
            return float(token.replace(",", ""))
        except ValueError:
            continue
    return None


def number_text(value: float) -> str:
    return str(int(value)) if value.is_integer() else f"{value:g}"


def verify(verifier: dict[str, Any], expected: Any, output: str) -> tuple[float, str]:
    """(score, feedback) of ``output`` against ``expected`` under the job's verifier."""
    kind, want, got = verifier.get("kind", "exact"), str(expected), str(output)
    if kind == "numeric":
        return _numeric(verifier, want, got)
    if kind == "exact":
        ok = got.strip() == want.strip()
        wrong = f"Expected exactly {clip(want.strip())!r} but got {clip(got.strip())!r}."
    elif kind == "normalized":
        ok = normalize(got) == normalize(want)
        wrong = f"Expected {clip(want)!r} but got {clip(got)!r}."
    else:
        raise ValueError(f"verifier kind {kind!r} is not supported by the peer scripts")
    return (1.0, f"Correct: {clip(want)!r}.") if ok else (0.0, wrong)


def _numeric(verifier: dict[str, Any], want_text: str, got_text: str) -> tuple[float, str]:
    want, got = last_number(want_text), last_number(got_text)
    if want is None:
        raise ValueError(f"expected value {want_text!r} is not a number")
    if got is None:
        return 0.0, (
            f"Expected the number {number_text(want)} but the output has none: {clip(got_text)!r}."
        )
    tolerance = {"abs_tol": verifier.get("abs_tol", 1e-6), "rel_tol": verifier.get("rel_tol", 0.0)}
    if math.isclose(got, want, **tolerance):
        return 1.0, f"Correct: {number_text(want)}."
    return 0.0, (
        f"Expected {number_text(want)} but the output's final number was {number_text(got)}"
        f" in {clip(got_text)!r}."
    )
