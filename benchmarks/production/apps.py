"""The applications ``loop.py`` serves, one strategy object each: the published prompt's
name (also the traffic's service), the seed prompt a sensible user writes first (it states
the output format), the ``{field}`` template the application fills with a question, how a
dataset row becomes a question, how the application's user reads a reply as right or wrong
against gold, the rubric judge's criterion and the reply cap.

- ``svamp``: a math helper on SVAMP word problems; a reply is right when the number on its
  last ``Answer:`` line is the gold number.
- ``clinc``: an intent router on CLINC150 (15 intents); the query comes with the row's label
  list, and a reply is right when its last line is the gold label after the quality
  benchmark's normalisation (``normalized`` verifier, ``last_line`` parser).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from emery.systems.parsers import ParseError, ParserConfig
from emery.systems.templates import placeholders, render
from emery.verifiers.text import normalize

HERE = Path(__file__).resolve().parent
DATASETS = HERE.parents[2] / "shared" / "datasets"

Gold = float | str


@dataclass(frozen=True)
class Question:
    """One question of the traffic: the template's fields and the gold answer."""

    row: int
    """The row's position in the file (0-based)."""
    fields: dict[str, str]
    gold: Gold


@dataclass(frozen=True)
class Application:
    """What the loop needs to know about the application it serves (module docstring)."""

    name: str
    """The published prompt's name, and the ``service.name`` of its traffic."""
    task: str
    """The seed's first sentence: what to do."""
    reply_format: str
    """The seed's second sentence: the output format (the scripted writer keeps it)."""
    stage: str
    """The prompt program's one stage (the published prompt's component)."""
    template: str
    """The user message, a ``{field}`` template over the row's input fields."""
    dataset: Path
    """The default question file (``--dataset``)."""
    offset: int
    """The default first row of the traffic's split (``--offset``)."""
    gold_of: Callable[[Any], Gold | None]
    """A row's ``expected`` as gold, None when it has none of the right type."""
    gold_words: str
    """What ``expected`` must be, for the error a row without it ends with."""
    correct: Callable[[str, Gold], float]
    """1.0 when the user reads a reply as right (the thumb, and the stretches' score)."""
    sample_replies: Callable[[Question], tuple[str, str]]
    """A right and a wrong reply in the seed's format (the scripted task model's)."""
    rubric: str
    """The rubric judge's one criterion."""
    max_tokens: int
    """The default reply cap (``--max-tokens``)."""
    seed_stage: dict[str, Any]
    """How emery's parser reads the seed's format (v1's baseline job)."""
    gold_verifier: dict[str, Any]
    """The verifier v1's baseline job scores the parsed reply against gold with."""
    reply_parser: dict[str, Any]
    """How the application reads a reply, as an emery parser (``[[system.stages]]
    parser``): the searches' stage parses with it, so a reply the application cannot read
    fails to parse and scores 0 under any verifier."""

    @property
    def seed(self) -> str:
        """v1: what a sensible person writes first, stating the output format."""
        return f"{self.task} {self.reply_format}"

    @property
    def shadow(self) -> str:
        """The service of the calls that ask the previous version on the side (not
        traffic)."""
        return f"{self.name}-shadow"

    @property
    def proposed(self) -> str:
        """The prompt a search's best is published under when the reviewer keeps the
        served version: the next stretch asks it on the side, the application never."""
        return f"{self.name}-proposed"

    def message(self, question: Question) -> str:
        """The user message the application sends for ``question``."""
        return render(self.template, question.fields)

    def load(self, path: Path, split: str, offset: int, count: int) -> list[Question]:
        """``count`` rows of ``split`` in file order (arrival order), from its
        ``offset``-th; an unusable row or too few rows end with one ``error:`` line."""
        names = sorted(placeholders(self.template))
        rows = []
        for index, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
            row = json.loads(line)
            if row.get("split") != split:
                continue
            given = row.get("input") or {}
            fields = {name: given.get(name) for name in names}
            gold = self.gold_of(row.get("expected"))
            if gold is None or not all(isinstance(v, str) for v in fields.values()):
                wanted = ", ".join(f"input.{name}" for name in names)
                raise SystemExit(
                    f"error: {path} row {index}: the {self.name} app needs {wanted} (text)"
                    f" and {self.gold_words} in expected"
                )
            rows.append(Question(index, {k: str(v) for k, v in fields.items()}, gold))
        picked = rows[offset : offset + count]
        if len(picked) < count:
            raise SystemExit(
                f"error: {path} has {len(rows)} {split!r} rows; {offset} + {count} are needed"
            )
        return picked


# -- svamp: the math helper ------------------------------------------------------------------

ANSWER = re.compile(r"Answer:\s*\$?(-?[\d,]*\.?\d+)")
"""The seed's format, as v1's parser reads it (the baseline job's val score only)."""
ANSWER_LINE = re.compile(r"Answer:(.*)")
BOXED = re.compile(r"\\boxed\{\s*\$?(-?[\d,]*\.?\d+)")
NUMBER = re.compile(r"-?[\d,]*\.?\d+")
READABLE_ANSWER = r"\A.*Answer:[^\n]*\d[^\n]*(?!.*Answer:)"
"""A reply the math helper can read: its last ``Answer:`` line has a number. The parser
keeps the reply up to the end of that line (the text the feedback verifier compares with
the recorded reply), and fails on any other reply."""


def number_gold(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def answer_of(reply: str) -> str | None:
    """The number a reply gives on its last ``Answer:`` line: the ``\\boxed{N}`` there when
    the model wrapped it in LaTeX (``Answer: \\(\\boxed{8}\\)``), else the line's first
    number; None without an ``Answer:`` line (the format the prompt asks for)."""
    lines = ANSWER_LINE.findall(reply)
    if not lines:
        return None
    boxed = BOXED.search(lines[-1])
    if boxed is not None:
        return boxed.group(1)
    plain = NUMBER.search(lines[-1])
    return None if plain is None else plain.group(0)


def correct_number(reply: str, gold: Gold) -> float:
    """1.0 when the number on the reply's last ``Answer:`` line is the gold number."""
    found = answer_of(reply)
    if found is None or not isinstance(gold, float):
        return 0.0
    try:
        return float(abs(float(found.replace(",", "")) - gold) < 1e-6)
    except ValueError:
        return 0.0


def answer_line(value: float) -> str:
    """The line the seed prompt asks for: ``Answer: 12`` (``Answer: 2.5``)."""
    return f"Answer: {int(value) if float(value).is_integer() else value}"


def worked_replies(question: Question) -> tuple[str, str]:
    """A right reply and one off by one, each ending with its ``Answer:`` line."""
    gold = float(question.gold)
    return (
        f"Let me add it up.\n{answer_line(gold)}",
        f"Let me add it up.\n{answer_line(gold + 1)}",
    )


SVAMP = Application(
    name="math-helper",
    task="Solve the problem step by step.",
    reply_format="End with 'Answer: <number>'.",
    stage="solve",
    template="{question}",
    dataset=DATASETS / "svamp.jsonl",
    offset=300,
    gold_of=number_gold,
    gold_words="a number",
    correct=correct_number,
    sample_replies=worked_replies,
    rubric=(
        "The reply solves the word problem correctly: the arithmetic is right and its last"
        " line, 'Answer: <number>', gives the number the question asks for."
    ),
    max_tokens=320,
    seed_stage={"parser": {"kind": "regex", "pattern": ANSWER.pattern}},
    gold_verifier={"kind": "numeric"},
    reply_parser={"kind": "regex", "pattern": READABLE_ANSWER, "ignore_case": False},
)


# -- clinc: the intent router --------------------------------------------------------------


BARE_LABEL = r"(?:\A|\n)[ \t\"'`*]*([A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)*)[ \t\"'`*.]*\s*\Z"
"""A reply the intent router can read: its last non-blank line is one label as the listed
labels are written (letters and digits joined by ``_``), at most quoted or ending in a
period; the parser gives that label. A sentence (``The intent is pto_used.``) fails."""


def label_gold(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


LAST_LINE = ParserConfig(kind="last_line")


def correct_label(reply: str, gold: Gold) -> float:
    """1.0 when the reply's last line is the gold label after ``normalize`` (lowercase,
    punctuation and articles dropped: ``PTO used.`` names ``pto_used``), as the quality
    benchmark's ``normalized`` verifier reads a ``last_line`` reply."""
    try:
        line = LAST_LINE.parse(reply)
    except ParseError:  # an empty reply
        return 0.0
    return float(normalize(line) == normalize(str(gold)))


def labels_of(question: Question) -> list[str]:
    """The intents the query comes with (the row's comma-separated ``labels``)."""
    return [label.strip() for label in question.fields["labels"].split(",") if label.strip()]


def label_replies(question: Question) -> tuple[str, str]:
    """The gold label, and the listed label after it (a wrong one)."""
    labels = labels_of(question)
    gold = str(question.gold)
    wrong = labels[(labels.index(gold) + 1) % len(labels)] if gold in labels else labels[0]
    return gold, wrong


CLINC = Application(
    name="intent-router",
    task="Classify the user's request into one of the listed intents.",
    reply_format="Reply with the intent label only.",
    stage="classify",
    template="Request: {query}\nIntents: {labels}",
    dataset=DATASETS / "clinc15.jsonl",
    offset=120,
    gold_of=label_gold,
    gold_words="a label",
    correct=correct_label,
    sample_replies=label_replies,
    rubric=(
        "The reply is the one intent label, among the listed labels, that names what the"
        " query asks for."
    ),
    max_tokens=24,
    seed_stage={"parser": {"kind": "last_line"}},
    gold_verifier={"kind": "normalized"},
    reply_parser={"kind": "regex", "pattern": BARE_LABEL, "ignore_case": False},
)

APPS = {"svamp": SVAMP, "clinc": CLINC}
