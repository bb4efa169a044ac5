"""Adapters: spans → OpenAI chat transcript (tool calls and results), → reflective records
and trace excerpts (spans → RL rows: ``test_trajectories.py``)."""

from __future__ import annotations

from typing import Any

from emery.core.models import Example
from emery.evaluation import Evaluator
from emery.lm import FakeLM
from emery.systems.function_agent import FunctionAgent, agent
from emery.tracing import MemoryRecorder, SpanRecord, current_scope, emit_message, emit_reward
from emery.tracing.adapters import (
    to_messages,
    trace_excerpt,
)
from emery.tracing.emitters import tool_call
from emery.tracing.lm import open_chat_span
from emery.verifiers import ExactMatch

WEATHER_CALL = {
    "id": "call_7",
    "type": "function",
    "function": {"name": "weather", "arguments": '{"city": "Oslo"}'},
}


def chat(messages: list[dict[str, Any]], reply: str, tool_calls: Any = None) -> dict[str, Any]:
    """Record one LM call as the openai instrumentation would."""
    scope = current_scope()
    assert scope is not None
    span = open_chat_span(scope, model="gpt-test", messages=messages, source="openai")
    span.finish(text=reply, model="gpt-test", finish_reason="stop", tool_calls=tool_calls)
    span.end()
    message: dict[str, Any] = {"role": "assistant", "content": reply}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return message


@agent
def tool_agent(task: dict[str, Any]) -> str:
    """Asks, gets a tool call, runs the tool, answers: the usual tool loop."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You answer weather questions using tools."},
        {"role": "user", "content": task["question"]},
    ]
    messages.append(chat(messages, "", tool_calls=[WEATHER_CALL]))
    emit_reward(0.25)  # a shaped reward for choosing the right tool
    with tool_call("weather", {"city": "Oslo"}, call_id="call_7") as call:
        assert call is not None
        call.result("rain, 4°C")
    messages.append({"role": "tool", "tool_call_id": "call_7", "content": "rain, 4°C"})
    emit_message("got the weather")
    messages.append(chat(messages, "It is raining in Oslo."))
    return "It is raining in Oslo."


async def traced_run() -> tuple[Any, list[SpanRecord]]:
    recorder = MemoryRecorder()
    system = FunctionAgent(tool_agent, instrument_openai=False)
    ev = Evaluator(system, ExactMatch(), FakeLM(lambda m: ""), recorder=recorder)
    example = Example(id="q1", input={"question": "Weather in Oslo?"}, expected="sunny")
    result = await ev.run_one(system.seed_candidate(), example, "train")
    return result, recorder.spans(result.rollout_id)


async def test_spans_become_one_openai_transcript_with_tool_calls_and_results() -> None:
    _, spans = await traced_run()
    messages = to_messages(spans)
    assert messages == [
        {"role": "system", "content": "You answer weather questions using tools."},
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": "", "tool_calls": [WEATHER_CALL]},
        {"role": "tool", "content": "rain, 4°C", "tool_call_id": "call_7"},
        {"role": "assistant", "content": "It is raining in Oslo."},
    ]


async def test_trace_excerpt_lists_calls_tools_rewards_and_messages() -> None:
    _, spans = await traced_run()
    excerpt = trace_excerpt(spans)
    assert excerpt.splitlines()[0].startswith("1. LM call — user: Weather in Oslo?")
    assert "[tool calls: weather]" in excerpt
    assert "reward 0.25" in excerpt
    assert 'tool weather({"city": "Oslo"}) → rain, 4°C' in excerpt
    assert "message: got the weather" in excerpt


def test_trace_excerpt_keeps_start_and_end_when_cut() -> None:
    from datetime import UTC, datetime

    at = datetime.now(UTC)
    spans = [
        SpanRecord(
            trace_id="t",
            span_id=f"{i:016x}",
            name="emery.message",
            start_time=at,
            end_time=at,
            attributes={"emery.message.text": f"line {i} " + "x" * 50},
            sequence=i,
        )
        for i in range(100)
    ]
    excerpt = trace_excerpt(list(reversed(spans)), max_chars=400)
    assert len(excerpt) <= 403
    assert excerpt.startswith("1. message: line 0")
    assert excerpt.rstrip().endswith("x")
    assert "line 99" in excerpt
    assert "\n…\n" in excerpt
