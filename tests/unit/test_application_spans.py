"""An application's calls through ``emery server``'s LM proxy are recorded in its store as
``chat`` spans of application traces: the attempt spans' attributes plus the service, the
parent trace of a ``traceparent`` header and the published prompt used; the reply is the
same, and a store that cannot write fails nothing."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from fastapi.testclient import TestClient

from emery.core.spans import SpanRecord
from emery.lm.fake import FakeLM
from emery.lm.tokens import TokenRecordingLM
from emery.reports.published import PublishedPrompt
from emery.server.api import create_server_app
from emery.server.launcher import ThreadLauncher
from emery.store.backends import MemoryStore
from emery.store.records import SpanFilter
from emery.tracing import conventions as sc
from emery.tracing.application_spans import parse_traceparent

CHAT = {
    "model": "support",
    "messages": [{"role": "user", "content": "Where is my order?"}],
    "temperature": 0.0,
    "max_tokens": 16,
}
TRACE = "0af7651916cd43dd8448eb211c80319c"
PARENT = "b7ad6b7169203331"


class Broken(FakeLM):
    async def complete(self, messages: Any, **params: Any) -> Any:
        raise TimeoutError("the model went away")


class FailingStore(MemoryStore):
    def add_spans(self, records: Sequence[SpanRecord]) -> None:
        raise OSError("disk full")


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


@pytest.fixture
def client(store: MemoryStore) -> Iterator[TestClient]:
    lm = FakeLM(lambda messages: "It ships today.", model="fake-1")
    app = create_server_app(store, default_lm=lm, launcher=ThreadLauncher())
    with TestClient(app) as client:
        yield client


def chat_spans(store: MemoryStore) -> list[SpanRecord]:
    return store.list_spans(SpanFilter()).items


def test_a_call_on_v1_is_a_chat_span_of_a_new_application_trace(
    client: TestClient, store: MemoryStore
) -> None:
    headers = {"X-Emery-Service": "support-bot", "X-Emery-Agent": "triage"}
    first = client.post("/v1/chat/completions", json=CHAT, headers=headers)
    second = client.post("/v1/chat/completions", json={**CHAT, "stream": True})
    assert first.status_code == 200, first.text
    assert first.json()["choices"][0]["message"]["content"] == "It ships today."
    assert "It ships today." in second.text
    one, two = sorted(chat_spans(store), key=lambda s: s.start_time)
    assert one.trace_id != two.trace_id
    assert one.parent_id is None
    assert (one.job_id, one.rollout_id, one.attempt_id) == (None, None, None)
    assert one.name == "chat support"
    assert one.status == "unset"
    a = one.attributes
    assert a[sc.SERVICE_NAME] == "support-bot"
    assert a[sc.GEN_AI_AGENT_NAME] == "triage"
    assert a[sc.GEN_AI_OPERATION_NAME] == "chat"
    assert a[sc.GEN_AI_REQUEST_MODEL] == "support"
    assert a[sc.GEN_AI_RESPONSE_MODEL] == "fake-1"
    assert a[sc.GEN_AI_REQUEST_TEMPERATURE] == 0.0
    assert a[sc.GEN_AI_REQUEST_MAX_TOKENS] == 16
    assert a[sc.GEN_AI_INPUT_MESSAGES] == '[{"role": "user", "content": "Where is my order?"}]'
    assert a[sc.GEN_AI_OUTPUT_MESSAGES] == '[{"role": "assistant", "content": "It ships today."}]'
    assert a[sc.GEN_AI_RESPONSE_ID] == first.json()["id"]
    assert a[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 3
    assert a[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ["stop"]
    assert a[sc.LM_SOURCE] == "proxy"
    assert a[sc.LM_STREAM] is False
    assert sc.LM_LATENCY_S in a
    assert sc.ROLLOUT_ID not in a
    assert two.attributes[sc.SERVICE_NAME] == "emery-proxy"
    assert two.attributes[sc.LM_STREAM] is True
    assert sc.GEN_AI_AGENT_NAME not in two.attributes


def test_a_traceparent_header_puts_the_call_in_the_applications_trace(
    client: TestClient, store: MemoryStore
) -> None:
    header = {"traceparent": f"00-{TRACE}-{PARENT}-01"}
    assert client.post("/v1/chat/completions", json=CHAT, headers=header).status_code == 200
    [span] = chat_spans(store)
    assert (span.trace_id, span.parent_id) == (TRACE, PARENT)


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        "garbage",
        f"ff-{TRACE}-{PARENT}-01",
        f"00-{'0' * 32}-{PARENT}-01",
        f"00-{TRACE}-{'0' * 16}-01",
        f"00-{TRACE}-{PARENT}-01-extra",
        f"00-{TRACE[:-1]}-{PARENT}-01",
    ],
)
def test_an_invalid_traceparent_starts_a_trace_of_its_own(header: str | None) -> None:
    assert parse_traceparent(header) is None


def test_a_later_traceparent_version_keeps_its_ids() -> None:
    assert parse_traceparent(f"01-{TRACE.upper()}-{PARENT}-01-more") == (TRACE, PARENT)


def test_a_failed_model_call_is_an_error_span(store: MemoryStore) -> None:
    app = create_server_app(store, default_lm=Broken([]), launcher=ThreadLauncher())
    with TestClient(app) as client:
        answer = client.post("/v1/chat/completions", json=CHAT)
    assert answer.status_code == 502
    [span] = chat_spans(store)
    assert span.status == "error"
    assert span.status_message == "TimeoutError: the model went away"
    assert span.events[0].attributes[sc.EXCEPTION_TYPE] == "TimeoutError"


def test_a_store_that_cannot_write_changes_nothing_for_the_caller(
    caplog: pytest.LogCaptureFixture,
) -> None:
    lm = FakeLM(lambda messages: "It ships today.")
    app = create_server_app(FailingStore(), default_lm=lm, launcher=ThreadLauncher())
    with caplog.at_level(logging.WARNING, "emery.proxy.routes"), TestClient(app) as client:
        answer = client.post("/v1/chat/completions", json=CHAT)
    assert answer.status_code == 200
    assert answer.json()["choices"][0]["message"]["content"] == "It ships today."
    assert "could not record the proxied call" in caplog.text


def test_a_call_on_a_prompts_route_names_the_prompt_and_keeps_its_tokens(
    store: MemoryStore,
) -> None:
    content = PublishedPrompt(
        name="support-bot",
        components={"solve": "Be kind."},
        job_id="j",
        job_name="support",
        candidate_id="c",
    )
    store.put_resource("prompt:support-bot", content.model_dump(mode="json"), kind="prompt")
    lm = TokenRecordingLM(FakeLM(lambda messages: "It ships today."))
    app = create_server_app(store, default_lm=lm, launcher=ThreadLauncher())
    with TestClient(app) as client:
        answer = client.post("/prompts/support-bot/v1/chat/completions", json=CHAT)
    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["message"]["content"] == "It ships today."
    [span] = chat_spans(store)
    a = span.attributes
    assert (a[sc.PROMPT_NAME], a[sc.PROMPT_VERSION]) == ("support-bot", 1)
    assert a[sc.GEN_AI_INPUT_MESSAGES].startswith('[{"role": "system", "content": "Be kind."}')
    assert len(a[sc.LM_COMPLETION_TOKEN_IDS]) == 3
    assert len(a[sc.LM_COMPLETION_LOGPROBS]) == 3
    assert a[sc.LM_PROMPT_TOKEN_IDS]
