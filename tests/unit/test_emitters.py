"""Emitters: one span each, usable anywhere inside a rollout (tasks, threads), no-ops outside."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest

from emery.core.models import Example
from emery.evaluation import Evaluator
from emery.lm import FakeLM
from emery.systems.function_agent import FunctionAgent, agent
from emery.tracing import (
    MemoryRecorder,
    SpanRecord,
    emit_annotation,
    emit_exception,
    emit_message,
    emit_object,
    emit_reward,
)
from emery.tracing import conventions as sc
from emery.tracing.emitters import parse_reward, tool_call
from emery.verifiers import ExactMatch


async def trace_of(fn: Any, word: str = "w") -> tuple[Any, list[SpanRecord]]:
    recorder = MemoryRecorder()
    system = FunctionAgent(fn, instrument_openai=False)
    ev = Evaluator(system, ExactMatch(), FakeLM(lambda m: "ok"), recorder=recorder)
    example = Example(id="e", input={"word": word}, expected=word)
    result = await ev.run_one(system.seed_candidate(), example, "train")
    return result, recorder.spans(result.rollout_id)


def named(spans: list[SpanRecord], name: str) -> list[SpanRecord]:
    return [s for s in spans if s.name == name]


async def test_each_emitter_records_one_span_with_its_attributes() -> None:
    @agent
    def emits(task: dict[str, Any]) -> str:
        emit_message("thinking about it")
        emit_object({"plan": ["a", "b"], "n": 2})
        emit_annotation({"env": "test", "difficulty": 3})
        try:
            raise KeyError("missing tool")
        except KeyError as exc:
            emit_exception(exc)
        emit_reward({"accuracy": 1.0, "brevity": 0.5}, primary="accuracy")
        return str(task["word"])

    result, spans = await trace_of(emits)
    assert result.score == 1.0  # a returned output is still scored by the verifier
    assert [s.name for s in spans[1:]] == [
        sc.MESSAGE_SPAN, sc.OBJECT_SPAN, sc.ANNOTATION_SPAN, sc.EXCEPTION_SPAN, sc.REWARD_SPAN,
    ]  # fmt: skip
    message, obj, annotation, exception, reward = spans[1:]
    assert message.attributes[sc.MESSAGE_TEXT] == "thinking about it"
    assert json.loads(obj.attributes[sc.OBJECT_JSON]) == {"plan": ["a", "b"], "n": 2}
    assert json.loads(annotation.attributes[sc.ANNOTATION_JSON]) == {
        "env": "test",
        "difficulty": 3,
    }
    assert exception.status == "error"
    (event,) = exception.events
    assert event.name == sc.EXCEPTION_EVENT
    assert event.attributes[sc.EXCEPTION_TYPE] == "KeyError"
    assert "missing tool" in event.attributes[sc.EXCEPTION_MESSAGE]
    assert "raise KeyError" in event.attributes[sc.EXCEPTION_STACKTRACE]
    assert reward.attributes[sc.REWARD_VALUE] == 1.0
    assert reward.attributes[sc.REWARD_PRIMARY] == "accuracy"
    assert json.loads(reward.attributes[sc.REWARD_DIMENSIONS]) == {
        "accuracy": 1.0,
        "brevity": 0.5,
    }
    assert all(s.rollout_id == result.rollout_id for s in spans)
    # The result carries an excerpt of the trace for reflection.
    assert result.trace.splitlines() == [
        "1. message: thinking about it",
        '2. object: {"n": 2, "plan": ["a", "b"]}',
        '3. annotation: {"difficulty": 3, "env": "test"}',
        "4. error: KeyError: 'missing tool'",
        '5. reward 1.0 {"accuracy": 1.0, "brevity": 0.5}',
    ]


async def test_the_last_emitted_reward_counts_when_the_agent_returns_nothing() -> None:
    @agent
    def rewards(task: dict[str, Any]) -> None:
        emit_reward(0.2)
        emit_reward({"primary": 0.75, "format": 1.0})

    result, spans = await trace_of(rewards)
    assert result.score == 0.75
    assert result.error is None
    assert len(named(spans, sc.REWARD_SPAN)) == 2


async def test_a_returned_float_is_the_reward_and_skips_the_verifier() -> None:
    @agent
    async def scored(task: dict[str, Any]) -> float:
        return 0.4

    result, _ = await trace_of(scored)
    assert result.score == 0.4
    assert "0.4" in result.feedback


async def test_emitters_work_in_nested_tasks_and_threads() -> None:
    @agent
    async def fans_out(task: dict[str, Any]) -> str:
        async def child(i: int) -> None:
            await asyncio.sleep(0.001 * i)
            emit_message(f"task {i}")

        await asyncio.gather(*(child(i) for i in range(3)))
        worker = threading.Thread(target=lambda: None)
        worker.start()
        worker.join()
        await asyncio.to_thread(emit_message, "from a worker thread")
        return str(task["word"])

    _, spans = await trace_of(fans_out)
    texts = sorted(s.attributes[sc.MESSAGE_TEXT] for s in named(spans, sc.MESSAGE_SPAN))
    assert texts == ["from a worker thread", "task 0", "task 1", "task 2"]
    root = spans[0]
    assert all(s.parent_id == root.span_id for s in spans[1:])


async def test_tool_calls_are_recorded_as_genai_tool_spans() -> None:
    @agent
    def uses_tool(task: dict[str, Any]) -> str:
        with tool_call("lookup", {"q": task["word"]}, call_id="call_1") as call:
            assert call is not None
            call.result({"found": True})
        return str(task["word"])

    _, spans = await trace_of(uses_tool)
    (tool,) = [s for s in spans if s.name == "execute_tool lookup"]
    assert tool.attributes[sc.GEN_AI_TOOL_NAME] == "lookup"
    assert json.loads(tool.attributes[sc.GEN_AI_TOOL_CALL_ARGUMENTS]) == {"q": "w"}
    assert json.loads(tool.attributes[sc.GEN_AI_TOOL_CALL_RESULT]) == {"found": True}
    assert tool.attributes[sc.GEN_AI_TOOL_CALL_ID] == "call_1"


def test_emitters_outside_a_rollout_do_nothing() -> None:
    emit_reward(1.0)
    emit_message("nobody listens")
    emit_object([1, 2])
    emit_annotation({"a": 1})
    emit_exception(ValueError("x"))
    with tool_call("t") as call:
        assert call is None


def test_bad_values_are_refused_even_outside_a_rollout() -> None:
    with pytest.raises(TypeError, match="JSON"):
        emit_object({1, 2})
    with pytest.raises(TypeError, match="dict"):
        emit_annotation(["not", "a", "dict"])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="number"):
        emit_reward("high")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="NaN"):
        emit_reward(float("nan"))
    with pytest.raises(ValueError, match="primary"):
        emit_reward({"a": 1.0, "b": 0.0})
    with pytest.raises(ValueError, match="not among"):
        emit_reward({"a": 1.0}, primary="b")


def test_parse_reward_picks_the_primary_value() -> None:
    assert parse_reward(1).value == 1.0
    assert parse_reward({"only": 0.3}).primary == "only"
    assert parse_reward({"primary": 0.1, "x": 0.9}).value == 0.1
    assert parse_reward({"a": 0.1, "b": 0.9}, primary="b").value == 0.9
