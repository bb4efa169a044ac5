"""``emery proxy`` and the task app refuse a client's mistakes with a 4xx and a JSON error
before any model call, limit bodies, check the key before reading the body on every route
but /health, and refuse to listen off loopback without a key (issue 19, #6 and #7)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from bad_input_support import one_error_line, run_cli
from fastapi.testclient import TestClient

from emery.lm import FakeLM
from emery.lm.config import LMConfig
from emery.proxy import create_app
from emery.taskapp import create_task_app

KEY = "k-123"
CHAT = "/v1/chat/completions"
ROLLOUT_CHAT = "/rollouts/r1/v1/chat/completions"
HELLO = [{"role": "user", "content": "hi"}]


def echo_agent(task: dict[str, Any]) -> str:
    return str(task.get("word", ""))


def rollout_body(word: str) -> dict[str, Any]:
    return {
        "correlation_id": "c1",
        "env": {
            "name": "e",
            "seed": 1,
            "config": {"example": {"id": "a", "input": {"word": word}}},
        },
        "policy": {"candidate_id": "seed"},
    }


@pytest.fixture
def model() -> FakeLM:
    return FakeLM(lambda messages: "ok", model="fake/ok")


@pytest.fixture
def proxy(model: FakeLM) -> Iterator[TestClient]:
    with TestClient(create_app(default_lm=model, max_body_bytes=64_000)) as client:
        yield client


MALFORMED: dict[str, bytes] = {
    "stream_options not an object": json.dumps(
        {"messages": HELLO, "stream": True, "stream_options": "yes"}
    ).encode(),
    "temperature not a number": json.dumps({"messages": HELLO, "temperature": "abc"}).encode(),
    "temperature NaN": b'{"messages": [{"role": "user", "content": "hi"}], "temperature": NaN}',
    "max_tokens not an int": json.dumps({"messages": HELLO, "max_tokens": "x"}).encode(),
    "max_tokens zero": json.dumps({"messages": HELLO, "max_tokens": 0}).encode(),
    "stop a number": json.dumps({"messages": HELLO, "stop": 5}).encode(),
    "lone surrogate": b'{"messages": [{"role": "user", "content": "a\\ud800b"}]}',
    "deeply nested": b'{"messages": [], "x": ' + b"[" * 20_000 + b"]" * 20_000 + b"}",
    "not JSON": b"{nope",
    "not UTF-8": b'{"messages": "\xff"}',
    "a JSON array": b"[]",
    "no messages": b"{}",
    "empty messages": json.dumps({"messages": []}).encode(),
    "message without role": json.dumps({"messages": [{"content": "hi"}]}).encode(),
    "content a number": json.dumps({"messages": [{"role": "user", "content": 5}]}).encode(),
}


@pytest.mark.parametrize("body", MALFORMED.values(), ids=MALFORMED.keys())
def test_proxy_answers_400_to_malformed_requests(
    body: bytes, proxy: TestClient, model: FakeLM
) -> None:
    response = proxy.post(CHAT, content=body, headers={"content-type": "application/json"})
    assert response.status_code == 400, response.text
    assert response.json()["error"]["type"] == "invalid_request_error"
    assert model.calls == []  # validated before any model call


def test_proxy_still_serves_a_valid_request(proxy: TestClient, model: FakeLM) -> None:
    body = {"messages": HELLO, "temperature": 0.5, "max_tokens": 8, "stop": ["\n"]}
    response = proxy.post(CHAT, json=body)
    assert response.status_code == 200
    assert response.json()["choices"][0]["message"]["content"] == "ok"
    assert len(model.calls) == 1


def test_proxy_limits_the_body(proxy: TestClient, model: FakeLM) -> None:
    big = json.dumps({"messages": [{"role": "user", "content": "x" * 100_000}]}).encode()
    assert proxy.post(CHAT, content=big).status_code == 413

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it streams in
        yield from (big[i : i + 8192] for i in range(0, len(big), 8192))

    response = proxy.post(CHAT, content=chunks())
    assert response.status_code == 413
    assert "over 64000 bytes" in response.json()["error"]["message"]
    assert model.calls == []


def test_proxy_key_is_checked_first_on_every_route_but_health(model: FakeLM) -> None:
    with TestClient(create_app(default_lm=model, api_key=KEY)) as client:
        assert client.get("/health").status_code == 200
        huge = b"x" * (5 * 1024 * 1024)  # over the limit and not JSON: refused for the key
        for method, path in [
            ("GET", "/v1/models"),
            ("GET", "/docs"),
            ("GET", "/openapi.json"),
            ("POST", CHAT),
            ("POST", ROLLOUT_CHAT),
        ]:
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"X-API-Key": "wrong"}):
                response = client.request(method, path, content=huge, headers=headers)
                assert response.status_code == 401, (path, headers)
                assert response.json()["error"]["type"] == "authentication_error"
        ok = client.post(CHAT, json={"messages": HELLO}, headers={"Authorization": f"Bearer {KEY}"})
        assert ok.status_code == 200
        assert client.get("/v1/models", headers={"X-API-Key": KEY}).status_code == 200


def test_task_app_key_is_checked_before_the_body() -> None:
    with TestClient(create_task_app(echo_agent, api_key=KEY)) as client:
        assert client.get("/health").status_code == 200
        huge = b"{" * (5 * 1024 * 1024)
        for path in ("/docs", "/openapi.json", "/task_info"):
            assert client.get(path).status_code == 401
        refused = client.post("/rollout", content=huge)
        assert refused.status_code == 401  # not a 422 describing the body
        assert refused.json() == {"detail": "invalid or missing API key"}
        headers = {"X-API-Key": KEY}
        assert client.get("/openapi.json", headers=headers).status_code == 200
        assert client.post("/rollout", content=huge, headers=headers).status_code == 413


def test_task_app_answers_4xx_to_malformed_rollouts() -> None:
    with TestClient(create_task_app(echo_agent)) as client:
        surrogate = json.dumps(rollout_body("WORD")).replace("WORD", "a\\ud800").encode()
        json_type = {"content-type": "application/json"}
        response = client.post("/rollout", content=surrogate, headers=json_type)
        assert response.status_code == 400
        assert "surrogate" in response.json()["detail"]
        nested = b'{"x": ' + b"[" * 20_000 + b"]" * 20_000 + b"}"
        assert client.post("/rollout", content=nested, headers=json_type).status_code == 400
        ok = client.post("/rollout", json=rollout_body("hello"))
        assert ok.status_code == 200
        assert ok.json()["output"] == "hello"


@pytest.mark.parametrize(
    "args",
    [
        ["proxy", "--host", "0.0.0.0", "--port", "1"],
        ["proxy", "--host", "192.0.2.1", "--model", "local/nope"],
        ["taskapp", "serve", "test_http_guards:echo_agent", "--host", "0.0.0.0"],
    ],
)
def test_listening_off_loopback_needs_a_key(
    args: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("EMERY_API_KEY", raising=False)
    monkeypatch.delenv("EMERY_TASK_APP_KEY", raising=False)
    assert run_cli(args) == 2
    assert "without an API key" in one_error_line(capsys.readouterr().err)


@pytest.mark.parametrize(
    "body",
    [
        b"1e999",  # a float JSON cannot write back
        b'{"correlation_id": NaN}',
        b'{"\\udc00": 1}',  # a lone surrogate as a key, echoed in the 422
        json.dumps({**rollout_body("x"), "attempt": "KEY"}).replace("KEY", "\\ud800").encode(),
    ],
    ids=["infinity", "nan", "surrogate key", "surrogate in a wrong-typed field"],
)
def test_task_app_validation_errors_never_fail_to_render(body: bytes) -> None:
    app = create_task_app(echo_agent)
    with TestClient(app, raise_server_exceptions=False) as client:
        response = client.post(
            "/rollout", content=body, headers={"content-type": "application/json"}
        )
    assert 400 <= response.status_code < 500, response.text
    assert response.json()["detail"]


def test_proxy_drops_empty_stop_strings(proxy: TestClient, model: FakeLM) -> None:
    from emery.proxy.chat_request import ChatRequest

    # an empty stop string broke the model call (502): it stops nothing, so it is dropped
    response = proxy.post(CHAT, json={"messages": HELLO, "stop": ["", "\n", ""]})
    assert response.status_code == 200, response.text
    request = ChatRequest.model_validate({"messages": HELLO, "stop": ["", "x"]})
    assert request.sampling() == {"stop": ["x"]}
    assert ChatRequest.model_validate({"messages": HELLO, "stop": [""]}).sampling() == {}


@pytest.mark.parametrize("url", ["\x01not a url", "ftp://127.0.0.1/v1", "http://[::1"])
def test_task_app_refuses_an_lm_proxy_url_it_cannot_call(url: str) -> None:
    # such a URL used to reach the heartbeat thread, which died with a traceback
    body = rollout_body("x")
    body["policy"]["config"] = {"inference_url": url}
    with TestClient(create_task_app(echo_agent), raise_server_exceptions=False) as client:
        response = client.post("/rollout", json=body)
    assert response.status_code == 400, response.text
    assert "inference_url" in response.json()["detail"]


def test_serve_threads_need_a_model_named_on_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "job.toml"
    config.write_text("")
    assert run_cli(["proxy", "--config", str(config), "--threads", "1"]) == 2
    assert "--threads applies to --model" in one_error_line(capsys.readouterr().err)


def test_serve_threads_reach_the_local_model_config(monkeypatch: pytest.MonkeyPatch) -> None:
    from emery.cli import proxy_cmd

    seen: list[LMConfig] = []
    monkeypatch.setattr(proxy_cmd, "resolve_lm", lambda config, **_: seen.append(config))
    proxy_cmd.task_model("local/smollm2-135m", None, None, None, threads=1)
    assert [config.n_threads for config in seen] == [1]
