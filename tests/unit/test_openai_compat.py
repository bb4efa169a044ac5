"""OpenAICompatibleLM against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from emery.core.errors import ConfigError
from emery.core.models import ChatMessage
from emery.lm import LMError, OpenAICompatibleLM, complete_sync, throttle
from emery.lm.provider_errors import ProviderRefused
from emery.lm.retry import RetryPolicy

MESSAGES: list[ChatMessage] = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Say hello."},
]
FAST_RETRY = RetryPolicy(
    max_attempts=5,
    base_delay_s=0.01,
    max_delay_s=0.05,
    rate_limit_base_s=0.01,
    rate_limit_max_s=0.05,
)


@dataclass
class ServerState:
    """What the fake endpoint does next and what it saw."""

    failures: list[int] = field(default_factory=list)  # status codes to answer first, in order
    failure_headers: dict[str, str] = field(default_factory=dict)  # sent with each failure
    hold_s: float = 0.0
    requests: list[dict[str, Any]] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0
    body: str | None = None  # a raw reply body to answer with instead of a completion
    garbage: int = 0  # how many requests to answer first with a body that is not JSON
    clients: set[str] = field(default_factory=set)  # host:port of each connection used
    no_json_mode: bool = False  # answer a request with response_format with a 400


def _completion(body: dict[str, Any]) -> dict[str, Any]:
    last = body["messages"][-1]["content"]
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,
        "model": body["model"] + "-served",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": f"echo: {last}"},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14},
    }


def _app(state: ServerState) -> FastAPI:
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def completions(request: Request) -> JSONResponse:
        body = await request.json()
        state.requests.append(body)
        if request.client is not None:
            state.clients.add(f"{request.client.host}:{request.client.port}")
        state.in_flight += 1
        state.max_in_flight = max(state.max_in_flight, state.in_flight)
        try:
            if state.hold_s:
                await asyncio.sleep(state.hold_s)
            if state.no_json_mode and "response_format" in body:
                error = {"message": "response_format is not supported", "type": "invalid"}
                return JSONResponse(status_code=400, content={"error": error})
            if state.failures:
                status = state.failures.pop(0)
                return JSONResponse(
                    status_code=status,
                    content={"error": {"message": f"status {status}", "type": "test"}},
                    headers=state.failure_headers,
                )
            if state.garbage:
                state.garbage -= 1
                return Response(b"<html>bad gateway</html>\x00\xff", media_type="text/html")
            if state.body is not None:
                return Response(state.body, media_type="application/json")
            return JSONResponse(_completion(body))
        finally:
            state.in_flight -= 1

    return app


@dataclass
class Server:
    base_url: str
    state: ServerState


@pytest.fixture(scope="module")
def server_runner() -> Iterator[tuple[str, ServerState]]:
    state = ServerState()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(_app(state), log_level="warning", lifespan="off", access_log=False)
    uv = uvicorn.Server(config)
    thread = threading.Thread(target=uv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    poll = threading.Event()  # never set: wait() is an interruptible pause while polling
    for _ in range(1000):
        if uv.started:
            break
        poll.wait(0.01)
    assert uv.started, "test server did not start"
    yield f"http://127.0.0.1:{port}/v1", state
    uv.should_exit = True
    thread.join(timeout=10)
    sock.close()
    assert not thread.is_alive()


@pytest.fixture
def server(server_runner: tuple[str, ServerState], monkeypatch: pytest.MonkeyPatch) -> Server:
    monkeypatch.setattr(throttle, "_registry", {})  # each test's model paced on its own
    base_url, state = server_runner
    state.failures.clear()
    state.failure_headers.clear()
    state.requests.clear()
    state.hold_s = 0.0
    state.in_flight = 0
    state.max_in_flight = 0
    state.body = None
    state.garbage = 0
    state.clients.clear()
    state.no_json_mode = False
    return Server(base_url=base_url, state=state)


def _lm(server: Server, **kw: Any) -> OpenAICompatibleLM:
    kw.setdefault("retry", FAST_RETRY)
    return OpenAICompatibleLM("test-model", base_url=server.base_url, **kw)


async def test_completion_text_usage_and_request_body(server: Server) -> None:
    completion = await _lm(server).complete(
        MESSAGES, temperature=0.5, max_tokens=7, stop=["\n"], top_p=0.9
    )
    assert completion.text == "echo: Say hello."
    assert completion.usage.prompt_tokens == 11
    assert completion.usage.completion_tokens == 3
    assert completion.finish_reason == "stop"
    assert completion.model == "test-model-served"
    assert not completion.cached
    (body,) = server.state.requests
    assert body["model"] == "test-model"
    assert body["messages"] == MESSAGES
    assert body["temperature"] == 0.5
    assert body["max_tokens"] == 7
    assert body["stop"] == ["\n"]
    assert body["top_p"] == 0.9


async def test_extra_body_is_sent(server: Server) -> None:
    await _lm(server, extra_body={"seed": 3}).complete(MESSAGES)
    assert server.state.requests[0]["seed"] == 3
    assert server.state.requests[0]["temperature"] == 0.0


async def test_rate_limits_are_retried(server: Server) -> None:
    server.state.failures[:] = [429, 429]
    completion = await _lm(server).complete(MESSAGES)
    assert completion.text == "echo: Say hello."
    assert completion.usage.prompt_tokens == 11
    assert len(server.state.requests) == 3


async def test_a_retry_after_is_waited_out_in_real_time(server: Server) -> None:
    server.state.failures[:] = [429, 503]
    server.state.failure_headers.update({"retry-after-ms": "300"})
    start = time.perf_counter()
    completion = await _lm(server, retry=RetryPolicy(max_attempts=1)).complete(MESSAGES)
    waited = time.perf_counter() - start
    assert completion.text == "echo: Say hello."
    assert len(server.state.requests) == 3  # two rate-limit answers used no attempt
    assert 0.6 <= waited < 2.0


@pytest.mark.parametrize(
    ("status", "says"), [(401, "API key was refused"), (404, "no such model or endpoint")]
)
async def test_a_refused_call_is_not_retried(server: Server, status: int, says: str) -> None:
    server.state.failures[:] = [status] * 5
    with pytest.raises(ProviderRefused, match=f"openai/test-model: .*{says}"):
        await _lm(server).complete(MESSAGES)
    assert len(server.state.requests) == 1


async def test_the_preflight_check_names_what_to_fix(server: Server) -> None:
    server.state.failures[:] = [401]
    with pytest.raises(ProviderRefused, match="api_key_env"):
        await _lm(server).check()
    server.state.failures[:] = [429]  # limited, but the key and model are good
    await _lm(server).check()
    await _lm(server).check()
    assert [r["max_tokens"] for r in server.state.requests] == [1, 1, 1]
    closed = OpenAICompatibleLM("m", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(ProviderRefused, match=r"cannot reach http://127.0.0.1:9/v1 .*base_url"):
        await closed.check()


async def test_server_errors_are_retried_up_to_max_attempts(server: Server) -> None:
    server.state.failures[:] = [500, 502, 500]
    lm = _lm(server, retry=RetryPolicy(max_attempts=3, base_delay_s=0.01))
    with pytest.raises(LMError, match="test-model"):
        await lm.complete(MESSAGES)
    assert len(server.state.requests) == 3


async def test_bad_request_is_not_retried(server: Server) -> None:
    server.state.failures[:] = [400]
    with pytest.raises(LMError, match="test-model"):
        await _lm(server).complete(MESSAGES)
    assert len(server.state.requests) == 1


async def test_concurrency_limit_is_respected(server: Server) -> None:
    server.state.hold_s = 0.05
    lm = _lm(server, concurrency=2)
    completions = await asyncio.gather(
        *(lm.complete([{"role": "user", "content": f"request {i}"}]) for i in range(6))
    )
    assert [c.text for c in completions] == [f"echo: request {i}" for i in range(6)]
    assert len(server.state.requests) == 6
    assert 1 <= server.state.max_in_flight <= 2


async def test_calls_reuse_their_connections(server: Server) -> None:
    # The client keeps its connections alive: three waves of four calls at once come on
    # at most four connections, not one each (a connect costs a round trip, and a TLS
    # handshake more, on every call).
    server.state.hold_s = 0.01
    lm = _lm(server, concurrency=4)
    for wave in range(3):
        await asyncio.gather(
            *(lm.complete([{"role": "user", "content": f"{wave}.{i}"}]) for i in range(4))
        )
    assert len(server.state.requests) == 12
    assert 1 <= len(server.state.clients) <= 4


def test_sync_calls_on_fresh_loops_reuse_the_lm(server: Server) -> None:
    lm = _lm(server, concurrency=1)
    assert complete_sync(lm, MESSAGES).text == "echo: Say hello."
    assert complete_sync(lm, MESSAGES).text == "echo: Say hello."
    assert len(server.state.requests) == 2


def test_missing_api_key_without_base_url_is_a_config_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("EMERY_TEST_NO_SUCH_KEY", raising=False)
    with pytest.raises(ConfigError, match="EMERY_TEST_NO_SUCH_KEY"):
        OpenAICompatibleLM("gpt-4o-mini", api_key_env="EMERY_TEST_NO_SUCH_KEY")
    monkeypatch.setenv("EMERY_TEST_NO_SUCH_KEY", "sk-test")
    assert OpenAICompatibleLM("gpt-4o-mini", api_key_env="EMERY_TEST_NO_SUCH_KEY").model == (
        "gpt-4o-mini"
    )


async def test_a_reply_that_is_not_a_chat_completion_is_an_lm_error(server: Server) -> None:
    server.state.body = '{"object": "error", "detail": "no choices here"}'
    with pytest.raises(LMError, match="not a chat completion"):
        await _lm(server).complete(MESSAGES)
    assert len(server.state.requests) == FAST_RETRY.max_attempts  # retried, then given up
    server.state.body = '{"choices": [{"message": {"content": null}}], "model": "m"}'
    empty = await _lm(server).complete(MESSAGES)  # a null content is an empty text
    assert (empty.text, empty.finish_reason, empty.usage.prompt_tokens) == ("", "stop", 0)


async def test_a_garbage_body_is_retried_like_a_server_error(server: Server) -> None:
    server.state.garbage = 2  # a proxy's error page answered with 200, twice
    completion = await _lm(server).complete(MESSAGES)
    assert completion.text == "echo: Say hello."
    assert len(server.state.requests) == 3


def _reply_with_logprobs(tokens: list[str], **extra: Any) -> str:
    body = _completion({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    body["choices"][0]["logprobs"] = {
        "content": [
            {"token": token, "logprob": -0.25 * (i + 1), "bytes": None, "top_logprobs": []}
            for i, token in enumerate(tokens)
        ]
    }
    body.update(extra)
    return json.dumps(body)


async def test_a_call_with_logprobs_reads_them_and_any_token_ids(server: Server) -> None:
    lm = _lm(server)
    server.state.body = _reply_with_logprobs(["echo", ":", " hi"])
    plain = await lm.complete(MESSAGES)  # the reply carries them: read whether asked or not
    completion = await lm.complete(MESSAGES, logprobs=True)
    assert server.state.requests[1]["logprobs"] is True
    assert "logprobs" not in server.state.requests[0]
    assert plain.tokens == completion.tokens
    assert completion.tokens is not None
    assert completion.tokens.completion_logprobs == [-0.25, -0.5, -0.75]
    assert completion.tokens.completion_token_ids == []  # OpenAI does not say

    # vLLM: tokens spelt as ids (return_tokens_as_token_ids) and the prompt's ids
    server.state.body = _reply_with_logprobs(
        ["token_id:7", "token_id:3"], prompt_token_ids=[1, 2, 5]
    )
    tokens = (await lm.complete(MESSAGES, logprobs=True)).tokens
    assert tokens is not None
    assert (tokens.prompt_token_ids, tokens.completion_token_ids) == ([1, 2, 5], [7, 3])

    server.state.body = None
    assert (await lm.complete(MESSAGES)).tokens is None


async def test_a_call_for_top_logprobs_sends_them_and_reads_the_likeliest_tokens(
    server: Server,
) -> None:
    lm = _lm(server)
    body = json.loads(_reply_with_logprobs(["4", "\n"]))
    content = body["choices"][0]["logprobs"]["content"]
    content[0]["top_logprobs"] = [
        {"token": "4", "logprob": -0.25, "bytes": [52]},
        {"token": "3", "logprob": -1.5, "bytes": [51]},
    ]
    content[1]["top_logprobs"] = [{"token": "\n", "logprob": -0.5, "bytes": [10]}]
    server.state.body = json.dumps(body)
    tokens = (await lm.complete(MESSAGES, logprobs=True, top_logprobs=2)).tokens
    assert (server.state.requests[0]["logprobs"], server.state.requests[0]["top_logprobs"]) == (
        True,
        2,
    )
    assert tokens is not None
    top = tokens.completion_top_logprobs
    assert top is not None
    assert [[(c.token, c.logprob) for c in choices] for choices in top] == [
        [("4", -0.25), ("3", -1.5)],
        [("\n", -0.5)],
    ]


@pytest.mark.parametrize("served", [True, False])
async def test_json_mode_is_sent_until_the_endpoint_rejects_it(
    server: Server, served: bool
) -> None:
    server.state.no_json_mode = not served
    lm = _lm(server)
    assert lm.json_mode
    said: list[ChatMessage] = [{"role": "user", "content": "Reply with a JSON object."}]
    for _ in range(2):
        completion = await lm.complete(said, response_format={"type": "json_object"})
        assert completion.text == "echo: Reply with a JSON object."
    sent = [body.get("response_format") for body in server.state.requests]
    if served:
        assert sent == [{"type": "json_object"}] * 2
    else:  # rejected once, then sent again without it, and never sent again
        assert sent == [{"type": "json_object"}, None, None]
        assert not lm.json_mode
