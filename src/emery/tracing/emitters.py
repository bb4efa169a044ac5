"""Emitters an agent calls anywhere inside a rollout; each records one span.

Outside a rollout they do nothing, so an agent instrumented with them also runs unchanged
in production.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from opentelemetry.trace import Span, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from emery.tracing import conventions as sc
from emery.tracing.scope import AttemptScope, Reward, current_scope

log = logging.getLogger(__name__)


def _span(scope: AttemptScope, name: str, attributes: dict[str, AttributeValue]) -> None:
    with scope.tracer.start_as_current_span(name, attributes=attributes):
        pass


def _as_float(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"reward {name!r} must be a number, not {type(value).__name__}")
    number = float(value)
    if math.isnan(number):
        raise ValueError(f"reward {name!r} is NaN")
    return number


def parse_reward(value: float | Mapping[str, float], primary: str | None = None) -> Reward:
    """A reward from a number, or from named numbers with one primary.

    For a mapping the primary is ``primary``, else the key ``"primary"``, else the only key.
    """
    if not isinstance(value, Mapping):
        return Reward(value=_as_float("reward", value))
    dimensions = {str(k): _as_float(str(k), v) for k, v in value.items()}
    if primary is None:
        if "primary" in dimensions:
            primary = "primary"
        elif len(dimensions) == 1:
            primary = next(iter(dimensions))
        else:
            raise ValueError(
                "a reward dict with several values needs primary=<key> or a 'primary' key"
            )
    if primary not in dimensions:
        raise ValueError(f"primary reward {primary!r} is not among {sorted(dimensions)}")
    return Reward(value=dimensions[primary], dimensions=dimensions, primary=primary)


def emit_reward(value: float | Mapping[str, float], *, primary: str | None = None) -> None:
    """Record a reward. The last reward emitted counts when the agent returns nothing."""
    reward = parse_reward(value, primary)
    scope = current_scope()
    if scope is None:
        log.debug("emit_reward outside a rollout: ignored")
        return
    scope.add_reward(reward)
    attributes: dict[str, AttributeValue] = {sc.REWARD_VALUE: reward.value}
    if reward.primary is not None:
        attributes[sc.REWARD_PRIMARY] = reward.primary
        attributes[sc.REWARD_DIMENSIONS] = json.dumps(reward.dimensions, sort_keys=True)
    _span(scope, sc.REWARD_SPAN, attributes)


def emit_message(text: str) -> None:
    """Record a free-text message (a thought, a log line, a note for reflection)."""
    scope = current_scope()
    if scope is None:
        return
    _span(scope, sc.MESSAGE_SPAN, {sc.MESSAGE_TEXT: str(text)})


def emit_object(value: Any) -> None:
    """Record any JSON-serialisable value. Raises TypeError for values JSON cannot hold."""
    try:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"emit_object needs a JSON-serialisable value: {exc}") from None
    scope = current_scope()
    if scope is None:
        return
    _span(scope, sc.OBJECT_SPAN, {sc.OBJECT_JSON: text})


def emit_exception(exc: BaseException) -> None:
    """Record an exception (type, message, traceback) without raising it."""
    scope = current_scope()
    if scope is None:
        return
    with scope.tracer.start_as_current_span(
        sc.EXCEPTION_SPAN, record_exception=False, set_status_on_exception=False
    ) as span:
        span.record_exception(exc)
        span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))


def emit_annotation(data: Mapping[str, Any]) -> None:
    """Record key/value metadata about the rollout (tags, labels, environment facts)."""
    if not isinstance(data, Mapping):
        raise TypeError("emit_annotation needs a dict")
    try:
        text = json.dumps(dict(data), ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"emit_annotation needs JSON-serialisable values: {exc}") from None
    scope = current_scope()
    if scope is None:
        return
    _span(scope, sc.ANNOTATION_SPAN, {sc.ANNOTATION_JSON: text})


class ToolCall:
    """An open ``execute_tool`` span; set ``result`` before the block ends."""

    def __init__(self, span: Span) -> None:
        self.span = span

    def result(self, value: Any) -> None:
        text = value if isinstance(value, str) else json.dumps(value, default=str)
        self.span.set_attribute(sc.GEN_AI_TOOL_CALL_RESULT, text)


@contextmanager
def tool_call(
    name: str, arguments: Any = None, *, call_id: str | None = None
) -> Iterator[ToolCall | None]:
    """Record a tool execution (GenAI ``execute_tool`` span) around the enclosed code."""
    scope = current_scope()
    if scope is None:
        yield None
        return
    attributes: dict[str, AttributeValue] = {
        sc.GEN_AI_OPERATION_NAME: sc.TOOL_OPERATION,
        sc.GEN_AI_TOOL_NAME: name,
        sc.GEN_AI_TOOL_CALL_ARGUMENTS: (
            arguments if isinstance(arguments, str) else json.dumps(arguments, default=str)
        ),
    }
    if call_id is not None:
        attributes[sc.GEN_AI_TOOL_CALL_ID] = call_id
    with scope.tracer.start_as_current_span(
        f"{sc.TOOL_OPERATION} {name}", attributes=attributes
    ) as span:
        yield ToolCall(span)
