"""Spans turned into what trainers and reflection read: chat transcripts, conversations
and a trace excerpt (the training rows of RL on agents: ``tracing/trajectories.py``).

Every function takes the spans of one attempt (any order; they are sorted by sequence).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from emery.core.spans import SpanRecord
from emery.tracing import conventions as sc


def ordered(spans: Sequence[SpanRecord]) -> list[SpanRecord]:
    """Spans by sequence number."""
    return sorted(spans, key=lambda s: s.sequence or 0)


def is_chat(span: SpanRecord) -> bool:
    return span.attributes.get(sc.GEN_AI_OPERATION_NAME) == sc.CHAT_OPERATION


def _json(value: Any, default: Any) -> Any:
    if not isinstance(value, str):
        return default
    try:
        return json.loads(value)
    except ValueError:
        return default


def request_messages(span: SpanRecord) -> list[dict[str, Any]]:
    """The messages a chat span sent."""
    messages = _json(span.attributes.get(sc.GEN_AI_INPUT_MESSAGES), [])
    return [m for m in messages if isinstance(m, dict)]


def response_message(span: SpanRecord) -> dict[str, Any] | None:
    """The assistant message a chat span received (None when the call failed)."""
    messages = _json(span.attributes.get(sc.GEN_AI_OUTPUT_MESSAGES), [])
    return messages[0] if messages and isinstance(messages[0], dict) else None


def _tool_message(span: SpanRecord) -> dict[str, Any] | None:
    if span.attributes.get(sc.GEN_AI_OPERATION_NAME) != sc.TOOL_OPERATION:
        return None
    result = span.attributes.get(sc.GEN_AI_TOOL_CALL_RESULT, "")
    message: dict[str, Any] = {"role": "tool", "content": str(result)}
    call_id = span.attributes.get(sc.GEN_AI_TOOL_CALL_ID)
    if call_id:
        message["tool_call_id"] = str(call_id)
    return message


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    keys = ("role", "content", "tool_calls", "tool_call_id")
    return all(a.get(k) == b.get(k) for k in keys)


def to_messages(spans: Sequence[SpanRecord]) -> list[dict[str, Any]]:
    """One OpenAI-format transcript of the attempt.

    Each LM call contributes the request messages the transcript does not already end
    with, then its reply (with ``tool_calls`` when it made any). Recorded tool executions
    become ``tool`` messages unless the next request already carries them.
    """
    transcript: list[dict[str, Any]] = []
    for span in ordered(spans):
        tool = _tool_message(span)
        if tool is not None:
            transcript.append(tool)
            continue
        if not is_chat(span):
            continue
        request = request_messages(span)
        overlap = _overlap(transcript, request)
        transcript.extend(request[overlap:])
        reply = response_message(span)
        if reply is not None:
            transcript.append(reply)
    return transcript


def to_conversations(spans: Sequence[SpanRecord]) -> list[list[dict[str, Any]]]:
    """The attempt's LM calls grouped into conversations: a call whose request continues
    the current transcript extends it; any other call (another stage, a fresh chat) starts a
    new one. Each conversation ends with an assistant reply."""
    conversations: list[list[dict[str, Any]]] = []
    current: list[dict[str, Any]] = []
    pending_tools: list[dict[str, Any]] = []
    for span in ordered(spans):
        tool = _tool_message(span)
        if tool is not None:
            pending_tools.append(tool)
            continue
        if not is_chat(span):
            continue
        reply = response_message(span)
        if reply is None:
            continue
        request = request_messages(span)
        candidate = current + pending_tools
        overlap = _overlap(candidate, request)
        if current and overlap == len(candidate):
            current = candidate + request[overlap:]
        elif current and overlap > 0 and overlap == len(current):
            current = current + request[overlap:]
        else:
            if current:
                conversations.append(current)
            current = list(request)
        pending_tools = []
        current.append(reply)
    if current:
        conversations.append(current)
    return conversations


def _overlap(transcript: list[dict[str, Any]], request: list[dict[str, Any]]) -> int:
    """How many leading request messages the transcript already holds (as its tail)."""
    for size in range(min(len(transcript), len(request)), 0, -1):
        tail = transcript[len(transcript) - size :]
        if all(_same(a, b) for a, b in zip(tail, request[:size], strict=True)):
            return size
    # A tool message recorded from a tool span and repeated by the request.
    return 0


def _clip(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def describe_span(span: SpanRecord, limit: int = 300) -> str | None:
    """One line about a span, for trace excerpts (None for spans not worth showing)."""
    a = span.attributes
    if is_chat(span):
        request = request_messages(span)
        last = request[-1] if request else {}
        reply = response_message(span)
        said = _clip(str(last.get("content") or ""), limit)
        if reply is None:
            return f"LM call ({last.get('role', '?')}: {said}) failed: {span.status_message}"
        answer = _clip(str(reply.get("content") or ""), limit)
        calls = reply.get("tool_calls") or []
        if calls:
            names = ", ".join(str(c.get("function", {}).get("name")) for c in calls)
            answer = f"{answer} [tool calls: {names}]".strip()
        return f"LM call — {last.get('role', '?')}: {said} → assistant: {answer}"
    if span.name == sc.REWARD_SPAN:
        dims = a.get(sc.REWARD_DIMENSIONS)
        return f"reward {a.get(sc.REWARD_VALUE)}" + (f" {dims}" if dims else "")
    if span.name == sc.MESSAGE_SPAN:
        return f"message: {_clip(str(a.get(sc.MESSAGE_TEXT, '')), limit)}"
    if span.name == sc.OBJECT_SPAN:
        return f"object: {_clip(str(a.get(sc.OBJECT_JSON, '')), limit)}"
    if span.name == sc.ANNOTATION_SPAN:
        return f"annotation: {_clip(str(a.get(sc.ANNOTATION_JSON, '')), limit)}"
    if span.name == sc.EXCEPTION_SPAN or (span.status == "error" and span.name == sc.ROLLOUT_SPAN):
        return f"error: {span.status_message}"
    if a.get(sc.GEN_AI_OPERATION_NAME) == sc.TOOL_OPERATION:
        arguments = _clip(str(a.get(sc.GEN_AI_TOOL_CALL_ARGUMENTS, "")), limit)
        result = _clip(str(a.get(sc.GEN_AI_TOOL_CALL_RESULT, "")), limit)
        return f"tool {a.get(sc.GEN_AI_TOOL_NAME)}({arguments}) → {result}"
    return None


def trace_excerpt(spans: Sequence[SpanRecord], max_chars: int = 2000) -> str:
    """The attempt as numbered lines, cut to ``max_chars`` (keeping the start and the end)."""
    lines = [line for span in ordered(spans) if (line := describe_span(span)) is not None]
    text = "\n".join(f"{i + 1}. {line}" for i, line in enumerate(lines))
    if len(text) <= max_chars:
        return text
    half = max_chars // 2
    return text[:half] + "\n…\n" + text[-half:]
