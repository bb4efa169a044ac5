"""The LLM judge behind the ``rubric``, ``contrastive`` and ``preference`` verifiers.

A judge verifier asks the judge model (``[lm.judge]``; the task model when unset) and turns
its reply into a ``Verdict`` whose feedback is the judge's reasoning, which reflection
reads. How it asks and reads is its ``JudgeScoring``, named by ``[verifier] scoring`` and
looked up in ``JUDGE_SCORINGS`` (``core/plugins.py``): by default (``json``,
``JsonVerdict``) the verifier's own JSON verdict, read robustly (a fenced block or the
first JSON object of the reply, scores clamped to [0, 1]); ``logprobs``
(``verifiers.verdict_probability``) asks a yes/no question and scores the judge's
probability of Yes instead; a ``"module:attr"`` or an ``emery.judge_scorings`` entry point
names one of your own. A reply that cannot be read scores 0
with feedback saying so and is counted in ``stats``; it never fails the rollout. A judge
model that raises is a verifier error, which the evaluator records like any other.
"""

from __future__ import annotations

import copy
import json
import logging
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, Self, runtime_checkable

from emery.core.errors import ConfigError
from emery.core.models import ChatMessage, Example
from emery.core.plugins import PluginRegistry
from emery.lm.base import LM, Completion
from emery.verifiers.base import Verdict, Verifier, as_text, clip

log = logging.getLogger(__name__)

FIELD_CHARS = 6000
"""The longest text of one input field, the output or the gold output shown to the judge."""

JUDGE_SYSTEM = (
    "You are a strict, fair grader. You judge an answer to a task and reply with one JSON"
    " object only, exactly in the format asked for, with no text before or after it."
)

_FENCED = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


class JudgeReplyError(ValueError):
    """The judge's reply holds no usable verdict; the message says what was wrong."""


@dataclass
class JudgeStats:
    """What a judge verifier has done: judge calls made, replies it could not read, and
    verdicts read from the reply's text because the judge model gave no token
    probabilities (``text_verdicts``, with ``scoring = "logprobs"``)."""

    calls: int = 0
    unreadable: int = 0
    text_verdicts: int = 0


@runtime_checkable
class JudgeScoring(Protocol):
    """How a judge verifier asks its model and turns the reply into a verdict."""

    name: str
    params: Mapping[str, Any]
    """What the judge call asks besides the messages (``complete``'s keyword arguments)."""

    def messages(
        self, verifier: JudgeVerifier, example: Example, output: Any
    ) -> list[ChatMessage]: ...

    def verdict(self, verifier: JudgeVerifier, example: Example, reply: Completion) -> Verdict:
        """The verdict the reply holds; ``JudgeReplyError`` when it holds none."""
        ...


class JsonVerdict:
    """The verifier's own prompt and JSON verdict (``scoring = "json"``)."""

    name = "json"
    params: Mapping[str, Any] = {}

    def messages(self, verifier: JudgeVerifier, example: Example, output: Any) -> list[ChatMessage]:
        return verifier.messages(example, output)

    def verdict(self, verifier: JudgeVerifier, example: Example, reply: Completion) -> Verdict:
        return verifier.read(example, reply.text)


JSON_VERDICT = JsonVerdict()

JUDGE_SCORINGS = PluginRegistry(
    what="judge scoring",
    plural="judge scorings",
    where="verifier.scoring",
    builtins={
        "json": f"{__name__}:JSON_VERDICT",
        "logprobs": "emery.verifiers.verdict_probability:VERDICT_PROBABILITY",
    },
    attribute="SCORING",
    group="emery.judge_scorings",
    type=JudgeScoring,  # type: ignore[type-abstract]  # a runtime-checkable protocol
)
"""``[verifier] scoring``: the built-ins, ``"module:attr"`` or an entry point."""


def judge_scoring(name: str) -> JudgeScoring:
    """The scoring ``name`` refers to, or a one-line ``ConfigError`` listing the known ones."""
    return JUDGE_SCORINGS.get(name)


def extract_json(text: str) -> Any:
    """The JSON value of a judge reply: the first fenced block that parses, else the first
    JSON object in the text. Raises ``JudgeReplyError`` when there is none."""
    for block in _FENCED.findall(text):
        try:
            return json.loads(block.strip())
        except json.JSONDecodeError:
            continue
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except json.JSONDecodeError:
            continue
        return value
    raise JudgeReplyError("no JSON object in the reply")


def read_score(value: Any) -> float:
    """A judge's score as a float clamped to [0, 1]; a number or a numeric string (a
    percentage like ``"80%"`` is read as 0.8). Raises ``JudgeReplyError`` otherwise."""
    if isinstance(value, bool):
        raise JudgeReplyError(f"score {value!r} is not a number")
    if isinstance(value, str):
        text = value.strip()
        scale = 100.0 if text.endswith("%") else 1.0
        try:
            value = float(text.removesuffix("%")) / scale
        except ValueError:
            raise JudgeReplyError(f"score {clip(text, 40)!r} is not a number") from None
    if not isinstance(value, int | float) or math.isnan(value):
        raise JudgeReplyError(f"score {value!r} is not a number")
    return min(1.0, max(0.0, float(value)))


def read_text(value: Any) -> str:
    """A reason or fact from the reply as one line ("" for none)."""
    if value is None:
        return ""
    return " ".join(as_text(value).split())


def render_input(example: Example) -> str:
    """The example's input fields, one ``name: value`` line each (long values cut)."""
    if not example.input:
        return "(no input)"
    return "\n".join(
        f"{name}: {clip(as_text(value), FIELD_CHARS)}" for name, value in example.input.items()
    )


def section(title: str, body: str) -> str:
    """A titled block of a judge prompt."""
    return f"## {title}\n{body.strip() or '(empty)'}"


class JudgeVerifier:
    """Base of the verifiers that ask a judge model: subclasses write the prompt
    (``messages``) and read the reply (``read``, raising ``JudgeReplyError``); one that a
    yes/no question can score also gives that question (``grading_question``) and what it
    is about (``grading_brief``). ``scoring`` picks which of the two the judge is asked."""

    kind: ClassVar[str] = "judge"
    needs_expected: bool = False
    grading_question: ClassVar[str] = ""
    """A yes/no question whose Yes means the answer passes (``scoring = "logprobs"``)."""

    def __init__(self, judge: LM | None = None, *, scoring: JudgeScoring | None = None) -> None:
        self.judge = judge
        self.scoring = scoring or JSON_VERDICT
        self.stats = JudgeStats()

    def with_judge(self, judge: LM) -> Self:
        """A copy of this verifier that asks ``judge`` (with its own counts)."""
        clone = copy.copy(self)
        clone.judge = judge
        clone.stats = JudgeStats()
        return clone

    def messages(self, example: Example, output: Any) -> list[ChatMessage]:
        raise NotImplementedError

    def read(self, example: Example, reply: str) -> Verdict:
        raise NotImplementedError

    def grading_brief(self, example: Example, output: Any) -> str:
        """The task, the answer and the standard ``grading_question`` asks about."""
        raise NotImplementedError(f"the {self.kind} verifier has no yes/no question")

    async def verify(self, example: Example, output: Any, trace: Any = None) -> Verdict:
        """Ask the judge about ``output`` and turn its reply into a verdict."""
        if self.judge is None:
            raise ConfigError(f"the {self.kind} verifier has no judge model (set [lm.judge])")
        self.stats.calls += 1
        messages = self.scoring.messages(self, example, output)
        completion = await self.judge.complete(messages, **self.scoring.params)
        try:
            return self.scoring.verdict(self, example, completion)
        except JudgeReplyError as exc:
            self.stats.unreadable += 1
            log.warning("the %s judge's reply on example %s: %s", self.kind, example.id, exc)
            return Verdict(
                score=0.0,
                feedback=(
                    f"The judge's reply could not be read ({exc}); scored 0."
                    f" The reply began: {clip(completion.text, 160)!r}"
                ),
            )


def uses_judge(verifier: Verifier) -> bool:
    """Whether ``verifier`` asks a judge model."""
    return isinstance(verifier, JudgeVerifier)


def with_judge(verifier: Verifier, judge: LM | None) -> Verifier:
    """``verifier`` given ``judge`` when it is a judge verifier without one; else as is."""
    if isinstance(verifier, JudgeVerifier) and verifier.judge is None and judge is not None:
        return verifier.with_judge(judge)
    return verifier
