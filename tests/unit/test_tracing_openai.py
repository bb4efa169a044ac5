"""The ``openai`` client instrumented: calls made inside a rollout become GenAI spans
(sync and async clients, streamed or not), calls outside pass through untouched."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from emery.core.models import Example
from emery.evaluation import Evaluator
from emery.lm import FakeLM, OpenAICompatibleLM
from emery.proxy import BackgroundServer, create_app
from emery.systems.function_agent import FunctionAgent, agent
from emery.tracing import MemoryRecorder, SpanRecord
from emery.tracing import conventions as sc
from emery.tracing.openai_instrument import instrument_openai, uninstrument_openai
from emery.verifiers import ExactMatch

BASE = {"url": ""}


@pytest.fixture(autouse=True)
def server() -> Iterator[BackgroundServer]:
    lm = FakeLM(lambda m: f"echo {m[-1]['content']}", model="fake/echo")
    with BackgroundServer(create_app(default_lm=lm)) as running:
        BASE["url"] = running.url + "/v1"
        yield running


def messages(word: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": "Echo."}, {"role": "user", "content": word}]


@agent
def sync_agent(task: dict[str, Any]) -> str:
    client = openai.OpenAI(base_url=BASE["url"], api_key="unused")
    plain = client.chat.completions.create(model="small", messages=messages(task["word"]))
    stream = client.chat.completions.create(
        model="small", messages=messages(task["word"] + " again"), stream=True, temperature=0.5
    )
    streamed = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    return f"{plain.choices[0].message.content}|{streamed}"


@agent
async def async_agent(task: dict[str, Any]) -> str:
    client = openai.AsyncOpenAI(base_url=BASE["url"], api_key="unused")
    plain = await client.chat.completions.create(model="small", messages=messages(task["word"]))
    stream = await client.chat.completions.create(
        model="small", messages=messages(task["word"] + " again"), stream=True, temperature=0.5
    )
    streamed = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    return f"{plain.choices[0].message.content}|{streamed}"


async def spans_of(fn: Any) -> tuple[Any, list[SpanRecord]]:
    recorder = MemoryRecorder()
    system = FunctionAgent(fn)  # instruments the openai client
    ev = Evaluator(system, ExactMatch(), FakeLM([]), recorder=recorder)
    result = await ev.run_one(
        system.seed_candidate(), Example(id="e", input={"word": "hi"}, expected="x")
    )
    return result, recorder.spans(result.rollout_id)


@pytest.mark.parametrize("fn", [sync_agent, async_agent])
async def test_openai_calls_inside_a_rollout_are_recorded(fn: Any) -> None:
    result, spans = await spans_of(fn)
    assert result.error is None
    assert result.output == "echo hi|echo hi again"
    root, plain, streamed = spans
    assert (plain.parent_id, streamed.parent_id) == (root.span_id, root.span_id)
    for span in (plain, streamed):
        assert span.name == "chat small"
        assert span.attributes[sc.LM_SOURCE] == "openai"
        assert span.attributes[sc.GEN_AI_PROVIDER_NAME] == "openai"
        assert span.attributes[sc.GEN_AI_RESPONSE_MODEL] == "fake/echo"
        assert span.status != "error"
    assert plain.attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] == 2
    assert plain.attributes[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ["stop"]
    assert json.loads(plain.attributes[sc.GEN_AI_OUTPUT_MESSAGES])[0]["content"] == "echo hi"
    assert streamed.attributes[sc.LM_STREAM] is True
    assert streamed.attributes[sc.GEN_AI_REQUEST_TEMPERATURE] == 0.5
    out = json.loads(streamed.attributes[sc.GEN_AI_OUTPUT_MESSAGES])[0]
    assert out["content"] == "echo hi again"
    assert [c.reply for c in result.calls] == ["echo hi", "echo hi again"]


async def test_a_failed_openai_call_is_an_error_span() -> None:
    @agent
    def broken(task: dict[str, Any]) -> str:
        client = openai.OpenAI(base_url=BASE["url"], api_key="unused", max_retries=0)
        try:
            client.chat.completions.create(model="m", messages=[])
        except openai.BadRequestError:
            return "handled"
        return "no error?"

    result, spans = await spans_of(broken)
    assert result.output == "handled"
    chat = spans[1]
    assert chat.status == "error"
    assert chat.events[0].attributes[sc.EXCEPTION_TYPE] == "openai.BadRequestError"


async def test_emerys_own_openai_client_is_not_recorded_twice() -> None:
    instrument_openai()
    recorder = MemoryRecorder()

    @agent
    async def via_lm(task: dict[str, Any], lm: Any) -> str:
        return str(await lm.acall(task["word"]))

    system = FunctionAgent(via_lm)
    upstream = OpenAICompatibleLM("small", base_url=BASE["url"], api_key="unused")
    ev = Evaluator(system, ExactMatch(), upstream, recorder=recorder)
    result = await ev.run_one(system.seed_candidate(), Example(id="e", input={"word": "yo"}))
    assert result.output == "echo yo"
    names = [(s.name, s.attributes.get(sc.LM_SOURCE)) for s in recorder.spans(result.rollout_id)]
    assert names == [(sc.ROLLOUT_SPAN, None), ("chat small", "emery")]


def test_outside_a_rollout_and_after_uninstrumenting_calls_pass_through() -> None:
    from openai.resources.chat.completions import completions

    instrument_openai()
    instrumented = completions.Completions.create
    instrument_openai()  # idempotent
    assert completions.Completions.create is instrumented
    client = openai.OpenAI(base_url=BASE["url"], api_key="unused")
    reply = client.chat.completions.create(model="m", messages=messages("out"))
    assert reply.choices[0].message.content == "echo out"
    uninstrument_openai()
    assert completions.Completions.create is instrumented.__wrapped__  # type: ignore[attr-defined]
    reply = client.chat.completions.create(model="m", messages=messages("again"))
    assert reply.choices[0].message.content == "echo again"
    instrument_openai()
