"""Recorded replies of the real local model, for integration tests that check emery's wiring
(a search runs, events are written, the best is the stored best) rather than the model.

``use_recordings(monkeypatch, name)`` makes every ``local/...`` model the test builds a
``RecordedLM``: it answers each request with the reply the real model gave to the same
request (model, messages and call parameters), read from
``tests/integration/recordings/<name>.json``. A request asked again gets the next reply
recorded for it. With ``EMERY_RECORD_LM=1`` the real model answers instead and the file is
written anew; a request with no recording otherwise fails the test, naming that variable.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from emery.core.models import ChatMessage
from emery.lm import config as lm_config
from emery.lm.base import LM, Completion

RECORDINGS = Path(__file__).parent / "recordings"
RECORD_ENV = "EMERY_RECORD_LM"


def request_key(model: str, messages: Sequence[ChatMessage], params: dict[str, Any]) -> str:
    """The key of one request: its model, messages and the parameters it set."""
    asked = {name: value for name, value in params.items() if value is not None}
    text = json.dumps([model, list(messages), asked], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


class Recordings:
    """The replies of one test, by request key, in the order they were given."""

    def __init__(self, path: Path, *, record: bool) -> None:
        self.path = path
        self.record = record
        self.replies: dict[str, list[dict[str, Any]]] = {}
        if not record:
            if not path.is_file():
                pytest.fail(f"no recording {path}: record it with {RECORD_ENV}=1")
            self.replies = json.loads(path.read_text(encoding="utf-8"))
        self._served: dict[str, int] = {}
        self._lock = threading.Lock()

    def next_reply(self, key: str) -> dict[str, Any] | None:
        """The next recorded reply to request ``key``; None when none is left."""
        with self._lock:
            n = self._served.get(key, 0)
            stored = self.replies.get(key, [])
            if n >= len(stored):
                return None
            self._served[key] = n + 1
            return stored[n]

    def add(self, key: str, reply: dict[str, Any]) -> None:
        with self._lock:
            self.replies.setdefault(key, []).append(reply)

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(self.replies, indent=1, sort_keys=True, ensure_ascii=False)
        self.path.write_text(text + "\n", encoding="utf-8")


class RecordedLM:
    """A local model's replies replayed from ``recordings`` (recorded from ``real`` when
    recording)."""

    def __init__(self, model: str, recordings: Recordings, real: Callable[[], LM]) -> None:
        self._model = model
        self.recordings = recordings
        self._real = real

    @property
    def model(self) -> str:
        return self._model

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        stop: Sequence[str] | None = None,
        **params: Any,
    ) -> Completion:
        asked = {"temperature": temperature, "max_tokens": max_tokens, "stop": stop, **params}
        key = request_key(self._model, messages, asked)
        if self.recordings.record:
            reply = await self._real().complete(messages, **asked)
            self.recordings.add(key, reply.model_dump(mode="json"))
            return reply
        stored = self.recordings.next_reply(key)
        if stored is None:
            pytest.fail(
                f"{self.recordings.path.name} holds no reply to this request of {self._model}"
                f" (the test or emery's prompts changed): record it again with {RECORD_ENV}=1"
            )
        return Completion.model_validate(stored)


@pytest.fixture
def recorded_lm(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Recordings]:
    """The test's local models replay ``recordings/<test name>.json`` (written when
    recording)."""
    recordings = use_recordings(monkeypatch, request.node.name)
    yield recordings
    if recordings.record:
        recordings.save()


def use_recordings(monkeypatch: pytest.MonkeyPatch, name: str) -> Recordings:
    """Every local model the test builds replays ``recordings/<name>.json`` (records it
    with ``EMERY_RECORD_LM=1``)."""
    recordings = Recordings(RECORDINGS / f"{name}.json", record=os.environ.get(RECORD_ENV) == "1")
    real_factory = lm_config.build_base_lm

    def build_base_lm(config: lm_config.LMConfig) -> LM:
        if not config.model.startswith("local/"):
            return real_factory(config)
        return RecordedLM(config.model, recordings, lambda: real_factory(config))

    monkeypatch.setattr(lm_config, "build_base_lm", build_base_lm)
    return recordings
