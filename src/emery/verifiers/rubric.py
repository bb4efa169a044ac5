"""The ``rubric`` verifier: a judge model scores the output on weighted criteria.

Criteria come from ``[[verifier.criteria]]`` and from an example's ``meta["rubric"]`` (a
list of criteria, or of plain sentences); an example's criterion with the name of a
configured one replaces it. The score is the weighted mean of the per-criterion scores
in [0, 1]; the feedback lists each criterion's score and the judge's reason, weakest first.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

from pydantic import Field, ValidationError

from emery.core.errors import ConfigError
from emery.core.models import ChatMessage, Example
from emery.core.settings import Settings
from emery.core.validation import describe
from emery.lm.base import LM
from emery.verifiers.base import Verdict, as_text, clip
from emery.verifiers.judge import (
    FIELD_CHARS,
    JUDGE_SYSTEM,
    JudgeReplyError,
    JudgeScoring,
    JudgeVerifier,
    extract_json,
    read_score,
    read_text,
    render_input,
    section,
)

META_KEY = "rubric"
"""The example metadata key that holds an example's own rubric criteria."""

NO_SCORE = "the judge's score for this criterion could not be read"


class Criterion(Settings):
    """One rubric criterion: a short name, what it asks for, and its weight (≥ 0)."""

    name: str = Field(min_length=1)
    description: str = ""
    weight: float = Field(default=1.0, ge=0.0)


def example_criteria(example: Example) -> list[Criterion]:
    """The criteria in ``example.meta["rubric"]`` (none when absent); a plain string is a
    criterion of weight 1 named by its text. Malformed entries are a ``ConfigError``."""
    raw = example.meta.get(META_KEY)
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ConfigError(f"example {example.id}: meta.{META_KEY} must be a list of criteria")
    criteria = []
    for index, item in enumerate(raw):
        if isinstance(item, str):
            item = {"name": item, "description": item}
        try:
            criteria.append(Criterion.model_validate(item))
        except ValidationError as exc:
            where = f"example {example.id}: meta.{META_KEY}.{index}"
            raise ConfigError(f"{where}: {describe(exc, Criterion)}") from None
    return criteria


def _key(name: str) -> str:
    return " ".join(name.lower().split())


def check_criteria(criteria: Sequence[Criterion], where: str) -> None:
    """Refuse an empty rubric, repeated names, and weights that sum to 0."""
    if not criteria:
        raise ConfigError(
            f"{where}: the rubric verifier has no criteria; add [[verifier.criteria]]"
            f" (name, description, weight) or a meta.{META_KEY} list to each example"
        )
    names = [_key(c.name) for c in criteria]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ConfigError(f"{where}: criterion {repeated[0]!r} is given twice")
    if sum(c.weight for c in criteria) <= 0:
        raise ConfigError(f"{where}: the criteria's weights sum to 0; give one a positive weight")


class RubricJudge(JudgeVerifier):
    """Scores an output on weighted criteria with a judge model (see the module doc)."""

    kind: ClassVar[str] = "rubric"
    grading_question: ClassVar[str] = "Does the answer meet the criteria?"

    def __init__(
        self,
        criteria: Sequence[Criterion] = (),
        *,
        judge: LM | None = None,
        scoring: JudgeScoring | None = None,
    ) -> None:
        super().__init__(judge, scoring=scoring)
        self.criteria = list(criteria)
        if self.criteria:
            check_criteria(self.criteria, "verifier.criteria")

    def criteria_for(self, example: Example) -> list[Criterion]:
        """The configured criteria with the example's own added (or replacing by name)."""
        own = example_criteria(example)
        replaced = {_key(c.name) for c in own}
        return [c for c in self.criteria if _key(c.name) not in replaced] + own

    def check_examples(self, examples: Iterable[Example]) -> None:
        """Fail before any model call when an example would have no usable rubric."""
        for example in examples:
            check_criteria(self.criteria_for(example), f"example {example.id}")

    def messages(self, example: Example, output: Any) -> list[ChatMessage]:
        criteria = self.criteria_for(example)
        check_criteria(criteria, f"example {example.id}")
        listed = "\n".join(
            f"{number}. {c.name}: {c.description or c.name}" for number, c in enumerate(criteria, 1)
        )
        shape = {c.name: {"score": "<0 to 1>", "reason": "<one sentence>"} for c in criteria}
        parts = [
            "Grade the answer to the task below on each criterion.",
            *_task(example, output),
            section("Criteria", listed),
            "Give each criterion a score from 0 (not met) to 1 (fully met) and a one-sentence"
            " reason that says what is missing or wrong. Reply with this JSON object only:\n"
            + json.dumps({"criteria": shape}, indent=1),
        ]
        return [
            {"role": "system", "content": JUDGE_SYSTEM},
            {"role": "user", "content": "\n\n".join(parts)},
        ]

    def grading_brief(self, example: Example, output: Any) -> str:
        """The task, the answer and the whole rubric (weights shown where they differ)."""
        criteria = self.criteria_for(example)
        check_criteria(criteria, f"example {example.id}")
        listed = "\n".join(
            f"{number}. {c.name}: {c.description or c.name}"
            + (f" (weight {c.weight:g})" if c.weight != 1 else "")
            for number, c in enumerate(criteria, 1)
        )
        return "\n\n".join(
            [
                "Judge the answer to the task below on the criteria.",
                *_task(example, output),
                section("Criteria", listed),
            ]
        )

    def read(self, example: Example, reply: str) -> Verdict:
        criteria = self.criteria_for(example)
        found = _entries(extract_json(reply), len(criteria))
        scored: list[tuple[Criterion, float, str]] = []
        unread = 0
        for number, criterion in enumerate(criteria, 1):
            entry = found.get(_key(criterion.name), found.get(str(number)))
            try:
                if entry is None:
                    raise JudgeReplyError("no score for it")
                score, reason = _score_and_reason(entry)
            except JudgeReplyError as exc:
                unread += 1
                score, reason = 0.0, f"{NO_SCORE} ({exc})"
            scored.append((criterion, score, reason))
        if unread == len(criteria):
            raise JudgeReplyError("the reply scores none of the criteria")
        total = sum(c.weight for c in criteria)
        score = min(1.0, max(0.0, sum(c.weight * s for c, s, _ in scored) / total))
        return Verdict(score=score, feedback=_feedback(score, scored))


def _task(example: Example, output: Any) -> list[str]:
    """The input, the answer and the reference answer where there is one."""
    parts = [
        section("Input", render_input(example)),
        section("Answer", clip(as_text(output), FIELD_CHARS)),
    ]
    if example.expected is not None:
        parts.append(section("Reference answer", clip(as_text(example.expected), FIELD_CHARS)))
    return parts


def _entries(value: Any, count: int) -> dict[str, Any]:
    """Criterion key (normalized name, or its number) → the reply's entry for it; accepts
    ``{"criteria": {...}}``, ``{"criteria": [{"name", ...}]}``, a bare mapping or list."""
    if isinstance(value, dict) and "criteria" in value:
        value = value["criteria"]
    if isinstance(value, list):
        by_name: dict[str, Any] = {}
        for index, item in enumerate(value, 1):
            if isinstance(item, dict) and isinstance(item.get("name"), str):
                by_name[_key(item["name"])] = item
            elif index <= count:
                by_name[str(index)] = item
        return by_name
    if isinstance(value, dict):
        return {_key(str(name)): entry for name, entry in value.items()}
    raise JudgeReplyError("the reply is not an object of criteria")


def _score_and_reason(entry: Any) -> tuple[float, str]:
    if isinstance(entry, dict):
        if "score" not in entry:
            raise JudgeReplyError("no score in its entry")
        return read_score(entry["score"]), read_text(entry.get("reason"))
    return read_score(entry), ""


def _feedback(score: float, scored: Sequence[tuple[Criterion, float, str]]) -> str:
    """``Rubric score 0.55 (weighted mean of 3 criteria).`` then each criterion, weakest
    first: ``name 0.20 (weight 2): reason.``"""
    lines = [f"Rubric score {score:.2f} (weighted mean of {len(scored)} criteria)."]
    for criterion, value, reason in sorted(scored, key=lambda item: item[1]):
        weight = f" (weight {criterion.weight:g})" if criterion.weight != 1 else ""
        text = re.sub(r"[.\s]+$", "", reason)
        lines.append(f"{criterion.name} {value:.2f}{weight}" + (f": {text}." if text else "."))
    return " ".join(lines)
