"""A local OpenAI-compatible endpoint that answers like the scripted models and injects
faults: HTTP 429, HTTP 500, a hang longer than the client's timeout, or a garbage body,
at a given rate of the chat-completion requests it gets.

``model`` in the request picks the script: ``reflection`` answers like
``scripted_lm.reflection_reply``, anything else like ``scripted_lm.task_reply``."""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from scripted_lm import reflection_reply, task_reply

FAULTS = ("429", "500", "hang", "garbage")
GARBAGE = b"<html><body>502 upstream glitch</body></html>\x00\xff{"


@dataclass
class Injector:
    """Which requests fail and how: each request fails with probability ``rate``, with a
    fault drawn from ``kinds``; counts what it did."""

    rate: float = 0.0
    kinds: tuple[str, ...] = FAULTS
    hang_s: float = 3.0
    seed: int = 0
    counts: Counter[str] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def draw(self) -> str | None:
        """The fault for the next request, or None to answer it."""
        with self._lock:
            self.counts["requests"] += 1
            if self._rng.random() >= self.rate:
                self.counts["answered"] += 1
                return None
            fault = self._rng.choice(self.kinds)
            self.counts[fault] += 1
            return fault


def completion(body: dict[str, Any]) -> dict[str, Any]:
    """A chat completion for a request body, from the scripted models."""
    messages = body.get("messages") or []
    script = reflection_reply if body.get("model") == "reflection" else task_reply
    text = script(messages)
    prompt = sum(len(str(m.get("content", "")).split()) for m in messages)
    return {
        "id": "chatcmpl-mock",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model") or "mock",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": prompt, "completion_tokens": len(text.split())},
    }


class _Handler(BaseHTTPRequestHandler):
    server: MockServer

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _send(self, status: int, payload: bytes, kind: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        fault = self.server.injector.draw()
        if fault == "429":
            error = {"error": {"message": "rate limited", "type": "rate_limit_error"}}
            return self._send(429, json.dumps(error).encode())
        if fault == "500":
            return self._send(500, b'{"error": {"message": "internal error"}}')
        if fault == "hang":
            time.sleep(self.server.injector.hang_s)
        if fault == "garbage":
            return self._send(200, GARBAGE)
        try:
            return self._send(200, json.dumps(completion(body)).encode())
        except (BrokenPipeError, ConnectionResetError):  # the client gave up on a hang
            return None


class MockServer(ThreadingHTTPServer):
    """The endpoint on ``127.0.0.1`` at a free port, served from a daemon thread."""

    daemon_threads = True

    def __init__(self, injector: Injector) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.injector = injector
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def __enter__(self) -> MockServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()
