"""Rollouts written up for the gradient LM: status, reward, conversation, feedback.

Each experiment is one train example run under the parent candidate: whether the run
finished, its score, what the system's components were sent and replied (the trace), the
output and the verifier's feedback. Long messages are clipped so a small model's context
holds the whole batch.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from emery.core.example_result import ExampleResult
from emery.core.models import Example
from emery.systems.base import ComponentCall

_LM_LINE = re.compile(r"^\d+\. LM call\b|^…$")


def clip(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters, keeping its start and its end (where a
    reply's final answer is) and marking the cut."""
    text = text.strip()
    if len(text) <= limit:
        return text
    mark = " …[cut]… "
    head = max(0, (limit - len(mark)) * 3 // 5)
    tail = max(0, limit - len(mark) - head)
    return text[:head].rstrip() + mark + text[len(text) - tail :].lstrip()


def as_text(value: Any) -> str:
    """A value as one readable string (JSON for structured values)."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def verdict(result: ExampleResult) -> str:
    """The run's status and reward in words."""
    status = result.rollout_status
    if result.error is not None or status not in (None, "succeeded"):
        how = "the run ended in an error" if status in (None, "failed") else f"the run {status}"
        tries = f" after {result.attempts} attempts" if result.attempts > 1 else ""
        return f"FAILED ({how}{tries}; score {result.score:.2f})"
    if result.score >= 1.0:
        return "PASSED (score 1.00)"
    return f"WRONG (score {result.score:.2f})"


def trace_lines(result: ExampleResult) -> list[str]:
    """The trace excerpt: all of it when the run reported no component calls, otherwise
    only what the calls do not already show (tool calls, messages, rewards, errors)."""
    lines = [line for line in result.trace.splitlines() if line.strip()]
    if result.calls:
        lines = [line for line in lines if not _LM_LINE.match(line)]
    if result.error:
        lines = [line for line in lines if result.error not in line]
    return [f"[trace] {line}" for line in lines]


def describe_call(
    call: ComponentCall,
    *,
    component: str,
    prompt: str,
    max_chars: int,
    label: bool,
    said: str = "",
) -> list[str]:
    """The lines showing one component call: its messages and reply (and its error, unless
    ``said`` already holds it)."""
    lines = [f"Step {call.component}:"] if label else []
    for message in call.messages:
        content = message["content"]
        if call.component == component and content.strip() == prompt.strip():
            content = "(the prompt above)"
        lines.append(f"[{message['role']}] {clip(content, max_chars)}")
    lines.append(f"[reply] {clip(call.reply, max_chars) or '(empty)'}")
    if call.error and call.error not in said:
        lines.append(f"[error] {clip(call.error, max_chars)}")
    return lines


def describe_experiment(
    number: int,
    example: Example,
    result: ExampleResult,
    *,
    component: str,
    prompt: str,
    max_chars: int = 600,
) -> str:
    """One experiment as a short block: the verdict and the checker's words first (a small
    model reads the start best), then the conversation, the output and the gold answer."""
    lines = [f"Example {number}: {verdict(result)}"]
    said = result.feedback
    if said:
        lines.append(f"Checker: {clip(said, max_chars)}")
    if result.error is not None and result.error not in said:
        lines.append(f"Error: {clip(result.error, max_chars)}")
        said = f"{said}\n{result.error}"
    if not result.calls:
        lines.append(f"Input: {clip(as_text(example.input), max_chars)}")
    label = len({call.component for call in result.calls}) > 1
    for call in result.calls:
        lines.extend(
            describe_call(
                call,
                component=component,
                prompt=prompt,
                max_chars=max_chars,
                label=label,
                said=said,
            )
        )
    lines.extend(trace_lines(result))
    if result.output is not None:
        lines.append(f"Output: {clip(as_text(result.output), max_chars)}")
    if example.expected is not None:
        lines.append(f"Expected: {clip(as_text(example.expected), max_chars)}")
    return "\n".join(lines)


def build_experiments(
    examples: Sequence[Example],
    results: Sequence[ExampleResult],
    *,
    component: str,
    prompt: str,
    max_chars: int = 600,
) -> str:
    """All experiments of one train batch, failures first (they carry the signal)."""
    if len(examples) != len(results):
        raise ValueError("one result per example is needed")
    pairs = sorted(zip(examples, results, strict=True), key=lambda pair: pair[1].score)
    return "\n\n".join(
        describe_experiment(
            number, example, result, component=component, prompt=prompt, max_chars=max_chars
        )
        for number, (example, result) in enumerate(pairs, start=1)
    )
