"""The reflective dataset: what one component saw and produced on each minibatch example,
with the verifier's feedback, cut to a token budget."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from emery.core.example_result import ExampleResult
from emery.core.models import Example
from emery.verifiers.base import as_text


class ReflectiveRecord(BaseModel):
    """One example as the reflection model sees it, for one component."""

    example_id: str
    inputs: dict[str, str] = Field(default_factory=dict)
    reply: str = ""
    score: float = 0.0
    feedback: str = ""
    expected: str | None = None
    trace: list[str] = Field(default_factory=list)


def approx_tokens(text: str) -> int:
    """A model-independent token estimate (about four characters a token)."""
    return (len(text) + 3) // 4


def excerpt(text: str, limit: int) -> str:
    """``text`` on at most ``limit`` characters: its start and its end around an ellipsis.

    The end is kept longer than the start: where a reply ends is where formats fail.
    """
    flat = text.strip()
    if len(flat) <= limit:
        return flat
    head = limit // 3
    tail = limit - head - 3
    return flat[:head].rstrip() + " … " + flat[-tail:].lstrip()


def _value(value: Any) -> str:
    return as_text(value)


def build_records(
    component: str,
    examples: Sequence[Example],
    results: Sequence[ExampleResult],
    *,
    excerpt_chars: int,
    show_expected: bool,
) -> list[ReflectiveRecord]:
    """One record per example, failures first (lowest score first), then successes.

    A record shows the component's last call on the example (inputs and reply) and the
    replies of the other components; for a system that reports no call of the component
    (an agent), the run's trace excerpt stands in for them.
    """
    records = []
    for example, result in zip(examples, results, strict=True):
        own = [call for call in result.calls if call.component == component]
        others = [call for call in result.calls if call.component != component]
        if own:
            call = own[-1]
            inputs = {name: excerpt(_value(v), excerpt_chars) for name, v in call.inputs.items()}
            reply = excerpt(call.reply, excerpt_chars) if call.reply else ""
            if not reply and call.error:
                reply = f"(no reply: {excerpt(call.error, excerpt_chars)})"
        else:
            inputs = {name: excerpt(_value(v), excerpt_chars) for name, v in example.input.items()}
            reply = "(no call of this component was reported; see the trace)"
        trace = [
            f"{call.component} replied: {excerpt(call.reply or call.error or '', excerpt_chars)}"
            for call in others
        ]
        if not own and result.trace:
            trace.append(f"trace: {excerpt(result.trace, 2 * excerpt_chars)}")
        elif not own and not result.trace:
            reply = "(this component was not used on this input)"
        expected = None
        if show_expected and example.expected is not None:
            expected = excerpt(_value(example.expected), excerpt_chars)
        records.append(
            ReflectiveRecord(
                example_id=example.id,
                inputs=inputs,
                reply=reply,
                score=result.score,
                feedback=excerpt(result.feedback or result.error or "", excerpt_chars),
                expected=expected,
                trace=trace,
            )
        )
    records.sort(key=lambda record: record.score)
    return records


def render_record(number: int, record: ReflectiveRecord) -> str:
    """One record as markdown for the reflection prompt."""
    lines = [f"### Example {number}"]
    if len(record.inputs) == 1:
        lines.append(f"Input: {next(iter(record.inputs.values()))}")
    else:
        lines.append("Inputs:")
        lines.extend(f"- {name}: {value}" for name, value in record.inputs.items())
    lines.extend(
        f"Trace: {line.removeprefix('trace: ')}"
        if line.startswith("trace: ")
        else f"(Other step) {line}"
        for line in record.trace
    )
    lines.append(f"Reply: {record.reply}")
    lines.append(f"Feedback: {record.feedback}")
    if record.expected is not None:
        lines.append(f"Expected answer: {record.expected}")
    return "\n".join(lines)


def render_records(records: Sequence[ReflectiveRecord], token_budget: int) -> tuple[str, int]:
    """The records that fit in ``token_budget`` (always at least one) and how many fit."""
    parts: list[str] = []
    used = 0
    for record in records:
        text = render_record(len(parts) + 1, record)
        cost = approx_tokens(text)
        if parts and used + cost > token_budget:
            break
        parts.append(text)
        used += cost
    return "\n\n".join(parts), len(parts)


_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_RUN_FAILED = re.compile(
    r"^(?:The run failed|The reply could not be read):\s*(?:stage '[^']*':\s*)?"
)
_QUOTED_TAIL = re.compile(r"""\s+(?:but was|in)\s+['"].*$""")


def mask_numbers(text: str) -> str:
    """``text`` with every number written as ``<n>``: a small model cannot copy an answer."""
    return _NUMBER.sub("<n>", text)


def render_compact(
    records: Sequence[ReflectiveRecord], token_budget: int, *, mask: bool, reply_chars: int = 24
) -> tuple[str, int]:
    """The problems only, one line each, for small reflection models.

    Perfect records are left out, the "The run failed: stage ...:" preamble and a closing
    quote of the output ("but was '…'", "in '…'") are cut from the feedback (the very end
    of the reply is shown instead), numbers
    are masked when ``mask`` is set, and repeated lines are shown once. Returns the text
    and how many records it covers.
    """
    lines: list[str] = []
    used = covered = 0
    for record in records:
        if record.score >= 1.0:
            continue
        feedback = _RUN_FAILED.sub("", " ".join(record.feedback.split()))
        feedback = _QUOTED_TAIL.sub("", feedback).rstrip(". ")
        feedback = feedback[:1].upper() + feedback[1:]
        tail = " ".join(record.reply.split())
        tail = tail if len(tail) <= reply_chars else "…" + tail[-reply_chars:]
        line = f'- {feedback}. The reply ended with: "{tail}"'
        line = mask_numbers(line) if mask else line
        covered += 1
        if line in lines:
            continue
        cost = approx_tokens(line)
        if lines and used + cost > token_budget:
            break
        lines.append(line)
        used += cost
    return "\n".join(lines), covered
