"""The LM proxy: a real ``openai`` client against a live server; calls through a rollout's
URL are recorded as spans of that attempt; streaming; unknown rollouts get 404."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from emery.core.models import Example
from emery.evaluation import Evaluator
from emery.lm import FakeLM
from emery.lm.tokens import TokenRecordingLM
from emery.proxy import BackgroundServer, create_app, free_port
from emery.proxy.embedded import RegistryProxy
from emery.store import MemoryStore
from emery.store.records import NewJob
from emery.systems.function_agent import FunctionAgent, agent
from emery.tracing import LiveRollouts, MemoryRecorder
from emery.tracing import conventions as sc
from emery.tracing.store_recorder import StoreRecorder, load_spans
from emery.tracing.trajectories import credited_calls
from emery.verifiers import ExactMatch

SYSTEM_PROMPT = "Reply with the word in capitals."


def capitals_lm() -> FakeLM:
    def reply(messages: Any) -> str:
        system = " ".join(m["content"] for m in messages if m["role"] == "system")
        word = messages[-1]["content"]
        return word.upper() if "capitals" in system else word

    return FakeLM(reply, model="fake/capitals")


@pytest.fixture
def live() -> Iterator[tuple[BackgroundServer, LiveRollouts]]:
    registry = LiveRollouts()
    with BackgroundServer(create_app(default_lm=capitals_lm(), registry=registry)) as server:
        yield server, registry


@agent(components=["SYSTEM_PROMPT"])
def openai_agent(task: dict[str, Any], rollout: Any) -> str:
    """A plain OpenAI SDK agent; its base URL is the rollout's proxy URL."""
    client = openai.OpenAI(base_url=rollout.base_url, api_key="unused")
    messages = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": task["word"]},
    ]
    first = client.chat.completions.create(model="gpt-4o-mini", messages=messages)
    stream = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[*messages, {"role": "user", "content": task["word"] * 20}],
        stream=True,
        stream_options={"include_usage": True},
    )
    streamed = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert streamed == task["word"].upper() * 20
    return first.choices[0].message.content or ""


def test_plain_v1_routes_forward_to_the_default_model(live: Any) -> None:
    server, _ = live
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused")
    reply = client.chat.completions.create(
        model="anything",
        messages=[{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": "hi"}],
    )
    assert reply.choices[0].message.content == "HI"
    assert reply.model == "fake/capitals"
    assert reply.usage is not None
    assert reply.usage.completion_tokens == 1
    assert [m.id for m in client.models.list()] == ["fake/capitals"]
    assert httpx.get(server.url + "/health").json() == {"status": "ok", "model": "fake/capitals"}


async def test_calls_through_a_rollout_url_are_recorded_as_its_spans(live: Any) -> None:
    server, registry = live
    recorder = MemoryRecorder()
    system = FunctionAgent(openai_agent, needs_proxy=True)
    ev = Evaluator(
        system,
        ExactMatch(),
        capitals_lm(),
        recorder=recorder,
        proxy=RegistryProxy(registry, server.url),
        concurrency=4,
    )
    examples = [Example(id=f"e{i}", input={"word": f"w{i}"}, expected=f"W{i}") for i in range(4)]
    result = await ev.evaluate(system.seed_candidate(), examples, "val")
    assert result.scores == [1.0] * 4
    assert len(registry) == 0  # finished attempts are no longer served
    for res in result.results:
        assert res.lm_calls == 2  # proxied calls count in the rollout's usage
        root, first, streamed = recorder.spans(res.rollout_id)
        assert root.name == sc.ROLLOUT_SPAN
        assert (first.parent_id, streamed.parent_id) == (root.span_id, root.span_id)
        assert {first.trace_id, streamed.trace_id} == {root.trace_id}
        a = first.attributes
        assert first.name == "chat gpt-4o-mini"
        assert a[sc.LM_SOURCE] == "proxy"
        assert a[sc.GEN_AI_OPERATION_NAME] == "chat"
        assert a[sc.GEN_AI_REQUEST_MODEL] == "gpt-4o-mini"
        assert a[sc.GEN_AI_RESPONSE_MODEL] == "fake/capitals"
        assert a[sc.GEN_AI_USAGE_INPUT_TOKENS] == 7  # words: 6 of the prompt + the word
        assert a[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 1
        assert json.loads(a[sc.GEN_AI_INPUT_MESSAGES])[-1]["content"] == res.example_id.replace(
            "e", "w"
        )
        assert json.loads(a[sc.GEN_AI_OUTPUT_MESSAGES]) == [
            {"role": "assistant", "content": res.output}
        ]
        assert streamed.attributes[sc.LM_STREAM] is True
        full = json.loads(streamed.attributes[sc.GEN_AI_OUTPUT_MESSAGES])[0]["content"]
        assert full == str(res.output) * 20  # the whole streamed text is recorded
        assert [c.component for c in res.calls] == ["SYSTEM_PROMPT", "SYSTEM_PROMPT"]


async def test_unknown_and_finished_rollouts_are_refused_with_404(live: Any) -> None:
    server, registry = live
    urls: list[str] = []

    @agent
    def remember(task: dict[str, Any], rollout: Any) -> str:
        urls.append(rollout.base_url)
        return "x"

    system = FunctionAgent(remember, needs_proxy=True)
    ev = Evaluator(system, ExactMatch(), capitals_lm(), proxy=RegistryProxy(registry, server.url))
    await ev.run_one(system.seed_candidate(), Example(id="e", input={}))
    (finished,) = urls
    assert "/rollouts/ro-" in finished
    assert finished.endswith(":1/v1")
    for base in (finished, server.url + "/rollouts/ro-nope/attempts/ro-nope:1/v1"):
        client = openai.OpenAI(base_url=base, api_key="unused", max_retries=0)
        with pytest.raises(openai.NotFoundError, match="unknown or finished rollout"):
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    response = httpx.post(server.url + "/rollouts/ro-nope/v1/chat/completions", json={})
    assert response.status_code == 404


def test_bad_requests_get_openai_style_errors(live: Any) -> None:
    server, _ = live
    url = server.url + "/v1/chat/completions"
    bad = httpx.post(url, content=b"not json", headers={"content-type": "application/json"})
    assert bad.status_code == 400
    assert bad.json()["error"]["type"] == "invalid_request_error"
    empty = httpx.post(url, json={"model": "m", "messages": []})
    assert empty.status_code == 400
    assert "messages" in empty.json()["error"]["message"]


async def test_seed_prompts_are_rewritten_for_agents_that_know_nothing_of_emery(
    live: Any,
) -> None:
    server, registry = live
    fixed_prompt = "Reply with the word."  # the agent's own text; it never reads candidates

    @agent(components={"system": fixed_prompt})
    def oblivious(task: dict[str, Any], rollout: Any) -> str:
        client = openai.OpenAI(base_url=rollout.base_url, api_key="unused")
        reply = client.chat.completions.create(
            model="m",
            messages=[
                {"role": "system", "content": fixed_prompt},
                {"role": "user", "content": task["word"]},
            ],
        )
        return reply.choices[0].message.content or ""

    system = FunctionAgent(oblivious, needs_proxy=True, rewrite_prompts=True)
    ev = Evaluator(system, ExactMatch(), capitals_lm(), proxy=RegistryProxy(registry, server.url))
    seed = system.seed_candidate()
    better = seed.derive(
        components={"system": "Reply with the word in capitals."}, lineage=seed.lineage
    )
    example = Example(id="e", input={"word": "ok"}, expected="OK")
    assert (await ev.run_one(seed, example)).score == 0.0
    assert (await ev.run_one(better, example)).score == 1.0


async def test_token_ids_and_logprobs_round_trip_through_the_proxy_and_the_store(
    live: Any,
) -> None:
    """With ``record_tokens`` the proxied call's span holds its tokens (stored and read back
    as training rows, under the agent the header names); the client's reply is unchanged."""
    server, registry = live
    replies: list[dict[str, Any]] = []

    @agent
    def solver(task: dict[str, Any], rollout: Any) -> str:
        client = openai.OpenAI(
            base_url=rollout.base_url, api_key="unused", default_headers={"X-Emery-Agent": "solver"}
        )
        messages = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": task["word"]},
        ]
        reply = client.chat.completions.create(model="m", messages=messages, logprobs=True)
        replies.append(reply.model_dump())
        return reply.choices[0].message.content or ""

    store = MemoryStore()
    job = store.create_job(NewJob(id="job-1", name="t", algorithm="baseline", config={}))
    model = capitals_lm()
    system = FunctionAgent(solver, needs_proxy=True)
    ev = Evaluator(
        system,
        ExactMatch(),
        TokenRecordingLM(model),
        recorder=StoreRecorder(store, job.id),
        job_id=job.id,
        proxy=RegistryProxy(registry, server.url),
    )
    result = await ev.run_one(system.seed_candidate(), Example(id="e", input={"word": "ok"}))
    assert result.output == "OK"
    (reply,) = replies
    assert reply["choices"][0]["logprobs"] is None  # what the agent receives is as before

    (call,) = credited_calls(load_spans(store, result.rollout_id), group_id="e", reward=1.0)
    assert call.agent == "solver"
    assert model.decode(call.prompt_token_ids) == f"{SYSTEM_PROMPT} ok"
    assert model.decode(call.completion_token_ids) == "OK"
    assert call.completion_logprobs == [-0.1 * (1 + call.completion_token_ids[0] % 5)]


@pytest.fixture
def fake_models_env() -> dict[str, str]:
    here = Path(__file__).parent
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(here), env.get("PYTHONPATH", "")])
    return env


@pytest.mark.slow  # starts processes: make test runs it, make check does not
def test_emery_serve_runs_the_proxy_in_its_own_process(
    tmp_path: Path, fake_models_env: dict[str, str]
) -> None:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "emery", "proxy", "--port", str(port),
         "--model", "python/fake_models:make_echo_lm"],
        env=fake_models_env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120  # a start-up: 20 s was near its time at a load of 12
        while True:
            try:
                if httpx.get(base + "/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "emery proxy did not start"
            time.sleep(0.1)
        client = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0)
        reply = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "echo me"}]
        )
        assert reply.choices[0].message.content == "echo me"
        assert reply.model == "fake/echo-factory"
        chunks = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "streamed text"}], stream=True
        )
        assert "".join(c.choices[0].delta.content or "" for c in chunks) == "streamed text"
        with pytest.raises(openai.NotFoundError):
            openai.OpenAI(
                base_url=base + "/rollouts/ro-x/attempts/ro-x:1/v1", api_key="u", max_retries=0
            ).chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
