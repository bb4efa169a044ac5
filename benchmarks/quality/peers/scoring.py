"""emery's reply parsers and text/numeric verifiers, standard library only, for peer scripts.

A peer runs in its own venv without emery, yet must score replies exactly as emery's job
does: ``parse`` mirrors ``emery.systems.parsers.ParserConfig.parse`` (raw, last_line,
regex, json_object) and ``verify`` mirrors the exact, normalized, numeric and json_object
verifiers (``emery.verifiers.json_object``, ``json_reply``), with the same scores and
feedback texts (``tests/unit/test_peer_spec.py`` holds them to it). Code replies (the
``code`` parser, the ``code_tests`` verifier) are read and run by emery's own
``verifiers/code_run.py``, loaded by its path: it needs nothing but the standard library.
The spec's ``parser`` and ``verifier`` are the job's configs as JSON (``model_dump``).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import math
import re
import string
import sys
import unicodedata
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?|-?\.\d+")
PUNCT = re.compile(f"[{re.escape(string.punctuation)}]")
ARTICLES = re.compile(r"\b(a|an|the)\b")
FENCE = re.compile(r"```[ \t]*([\w+-]*)[^\n]*\n(.*?)```", re.DOTALL)
STRIPPED = ".,;:!?'\"`()[]{}<>\u2018\u2019\u201c\u201d\u00ab\u00bb\u2026"


def clip(text: str, limit: int = 120) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def expected_text(expected: Any) -> str:
    """A row's expected output as the text a peer carries: JSON for anything but text."""
    return expected if isinstance(expected, str) else json.dumps(expected, ensure_ascii=False)


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
    if kind == "json_object":
        return json.dumps(read_json_object(text), ensure_ascii=False)
    if kind == "code":
        code: str = code_run().read_code(text)
        if not code:
            raise ValueError("the reply is empty")
        return code
    raise ValueError(f"parser kind {kind!r} is not supported by the peer scripts")


def read_json_object(text: str) -> dict[str, Any]:
    """The first JSON object in the reply's fenced blocks (``json`` ones first), then in the
    reply; ValueError with emery's message when there is none."""
    if not text.strip():
        raise ValueError("the reply is empty; it must be a JSON object")
    blocks = [(m.group(1).lower(), m.group(2)) for m in FENCE.finditer(text)]
    fenced = [b for tag, b in blocks if tag == "json"] + [b for tag, b in blocks if tag != "json"]
    why = None
    for source in [*fenced, text]:
        start = source.find("{")
        while start >= 0:
            try:
                value, _ = json.JSONDecoder().raw_decode(source, start)
            except json.JSONDecodeError as exc:
                why = why or f"{exc.msg} at character {exc.pos - start} of the object"
            else:
                if isinstance(value, dict):
                    return value
            start = source.find("{", start + 1)
    if why is None:
        raise ValueError(f"the reply has no JSON object ({{...}}): {clip(text)!r}")
    raise ValueError(f"the reply has no JSON object that parses ({why}): {clip(text)!r}")


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


@cache
def code_run() -> ModuleType:
    """emery's ``verifiers/code_run.py``, loaded from the checkout this script is in."""
    path = Path(__file__).resolve().parents[3] / "src" / "emery" / "verifiers" / "code_run.py"
    spec = importlib.util.spec_from_file_location("emery_code_run", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def verify(
    verifier: dict[str, Any],
    expected: Any,
    output: str,
    fields: dict[str, Any] | None = None,
) -> tuple[float, str]:
    """(score, feedback) of ``output`` against ``expected`` under the job's verifier;
    ``fields`` are the example's inputs (``code_tests`` reads its entry point and prompt)."""
    kind, want, got = verifier.get("kind", "exact"), str(expected), str(output)
    if kind == "code_tests":
        return _code_tests(verifier, want, got, fields or {})
    if kind == "numeric":
        return _numeric(verifier, want, got)
    if kind == "json_object":
        return _json_object(verifier.get("match", "f1"), expected, output)
    if kind == "exact":
        ok = got.strip() == want.strip()
        wrong = f"Expected exactly {clip(want.strip())!r} but got {clip(got.strip())!r}."
    elif kind == "normalized":
        ok = normalize(got) == normalize(want)
        wrong = f"Expected {clip(want)!r} but got {clip(got)!r}."
    else:
        raise ValueError(f"verifier kind {kind!r} is not supported by the peer scripts")
    return (1.0, f"Correct: {clip(want)!r}.") if ok else (0.0, wrong)


def _code_tests(
    verifier: dict[str, Any], tests: str, output: str, fields: dict[str, Any]
) -> tuple[float, str]:
    if not tests.strip():
        raise ValueError("no test code in expected")
    entry = fields.get(verifier.get("entry_point_field", "entry_point"))
    prompt = fields.get(verifier.get("prompt_field", "prompt"))
    scored: tuple[float, str] = asyncio.run(
        code_run().score_code(
            output,
            tests,
            entry_point=entry if isinstance(entry, str) else None,
            prompt=prompt if isinstance(prompt, str) else None,
            timeout_s=float(verifier.get("timeout_s", 10.0)),
            memory_mb=int(verifier.get("memory_mb", 512)),
        )
    )
    return scored


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


def _canonical(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def normalize_text(text: str) -> str:
    folded = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(folded.split()).strip(STRIPPED + " ").strip()


def _normalized_tree(value: Any) -> Any:
    if isinstance(value, str):
        return normalize_text(value)
    if isinstance(value, dict):
        return {normalize_text(str(k)): _normalized_tree(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalized_tree(item) for item in value]
    return value


def normalized_value(value: Any) -> str:
    if isinstance(value, str):
        return normalize_text(value)
    if isinstance(value, dict | list):
        return _canonical(_normalized_tree(value))
    return normalize_text(_canonical(value))


def _show(value: Any, limit: int = 60) -> str:
    return clip(json.dumps(value, ensure_ascii=False), limit)


def _json_object(match: str, expected: Any, output: Any) -> tuple[float, str]:
    """Key-value F1 (``match = "f1"``) or exact equality of the reply's JSON object."""
    want_object = json.loads(expected) if isinstance(expected, str) else expected
    if not isinstance(want_object, dict):
        raise ValueError("expected value is not a JSON object")
    want = _show(want_object, 200)
    try:
        got = output if isinstance(output, dict) else read_json_object(str(output))
    except ValueError as exc:
        return 0.0, f"The reply must be a JSON object like {want}: {exc}."
    key, value = (normalize_text, normalized_value) if match == "f1" else (str, _canonical)
    replied = {key(str(k)): (str(k), v) for k, v in got.items()}
    wanted = {key(str(k)) for k in want_object}
    right, wrong, missing = [], [], []
    for name, gold in want_object.items():
        found = replied.get(key(str(name)))
        if found is None:
            missing.append((str(name), gold))
        elif value(found[1]) == value(gold):
            right.append(str(name))
        else:
            wrong.append((str(name), gold, found[1]))
    extra = [(k, v) for norm, (k, v) in replied.items() if norm not in wanted]
    parts = []
    if missing:
        parts.append(
            "missing keys: " + ", ".join(f"{_show(k)} (expected {_show(v)})" for k, v in missing)
        )
    if extra:
        parts.append("extra keys: " + ", ".join(f"{_show(k)} (= {_show(v)})" for k, v in extra))
    if wrong:
        shown = ", ".join(f"{_show(k)} expected {_show(w)} but got {_show(g)}" for k, w, g in wrong)
        parts.append(f"wrong values: {shown}")
    problems = "; ".join(parts)
    if match == "exact":
        if not problems:
            return 1.0, f"Correct: exactly {want}."
        return 0.0, f"Expected exactly {want}; {problems}."
    n_replied, n_expected = (
        len(right) + len(wrong) + len(extra),
        len(right) + len(wrong) + len(missing),
    )
    precision = len(right) / n_replied if n_replied else 1.0
    recall = len(right) / n_expected if n_expected else 1.0
    score = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    if not problems:
        return score, f"Correct: every key and value of {want}."
    return score, (
        f"Key-value F1 {score:.2f} (precision {precision:.2f}, recall {recall:.2f}) against"
        f" {want}; {problems}."
    )
