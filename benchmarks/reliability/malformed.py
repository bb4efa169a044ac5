"""Hand-made malformed requests for ``emery proxy`` and the task app: each is
(label, method, path, headers, body); every one must get an answer below 500."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

Request = tuple[str, str, str, dict[str, str], bytes | Iterator[bytes]]
JSON = {"content-type": "application/json"}
DEPTH = 100_000
HUGE = 5 * 1024 * 1024  # over the 4 MiB limit

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
ROLLOUT = {
    "correlation_id": "c1",
    "env": {"name": "fuzz", "seed": 0, "config": {"example": {"id": "e1", "input": {}}}},
    "policy": {"candidate_id": "k1", "components": {"system_prompt": "Be brief."}},
}


def _with(base: dict[str, Any], path: str, value: Any) -> bytes:
    """``base`` as JSON with the field at dotted ``path`` set to ``value``."""
    data = json.loads(json.dumps(base))
    keys = path.split(".")
    target = data
    for key in keys[:-1]:
        target = target[int(key)] if isinstance(target, list) else target[key]
    last = keys[-1]
    if isinstance(target, list):
        target[int(last)] = value
    else:
        target[last] = value
    return json.dumps(data).encode()


def _nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def _chunks(total: int, size: int = 1 << 16) -> Iterator[bytes]:
    """A JSON string body of ``total`` bytes sent in chunks (no Content-Length)."""
    yield b'{"model": "'
    for _ in range(total // size):
        yield b"a" * size
    yield b'"}'


def bodies(base: dict[str, Any], wrong: dict[str, Any]) -> list[tuple[str, bytes]]:
    """Malformed bodies common to every JSON route, plus ``base`` with each ``wrong`` field."""
    common = [
        ("empty body", b""),
        ("invalid JSON", b'{"model": '),
        ("JSON null", b"null"),
        ("JSON array", b"[]"),
        ("JSON string", b'"x"'),
        ("JSON number", b"1e999"),
        ("NaN", b'{"model": NaN}'),
        ("not UTF-8", b'{"model": "\xff\xfe"}'),
        ("BOM", "\ufeff".encode() + json.dumps(base).encode()),
        ("deep nesting", _nested(DEPTH)),
        (
            "deep nesting in a field",
            json.dumps(base)[:-1].encode() + b', "x": ' + _nested(DEPTH) + b"}",
        ),
        ("lone surrogate key", b'{"\\udc00": 1}'),
        ("huge body", b'{"model": "' + b"a" * HUGE + b'"}'),
        ("long string field", _with(base, next(iter(base)), "z" * (2 * 1024 * 1024))),
    ]
    common += [
        (f"wrong {path}={value!r:.30}", _with(base, path, value)) for path, value in wrong.items()
    ]
    return common


def _chat_wrong() -> dict[str, Any]:
    return {
        "messages": "x",
        "messages.0": 1,
        "messages.0.role": 5,
        "messages.0.content": {"a": 1},
        "model": 5,
        "temperature": "abc",
        "max_tokens": "x",
        "stop": 5,
        "stream": "yes",
        "stream_options": "yes",
        "n": -1,
        "top_p": [1],
        "messages.0.content ": "\ud800",  # an extra key holding a lone surrogate
    }


def _rollout_wrong() -> dict[str, Any]:
    return {
        "correlation_id": 5,
        "attempt": "first",
        "env": "x",
        "env.seed": "x",
        "env.config.example": [],
        "env.config.example.input": "q",
        "policy.components": {"system_prompt": 5},
        "policy.candidate_id": None,
        "env.config.example.input.question": "\ud800 lone",
        "policy.config": {"inference_url": 5},
    }


def _surrogate(base: dict[str, Any], path: str) -> bytes:
    """``base`` with a lone surrogate escape written into the string at ``path``."""
    return _with(base, path, "SURROGATE").replace(b"SURROGATE", b"\\ud800")


def malformed_requests(server: str) -> Iterator[Request]:
    """Every malformed request for ``server`` (``serve`` or ``taskapp``)."""
    if server == "serve":
        paths = ["/v1/chat/completions", "/rollouts/r1/attempts/a1/v1/chat/completions"]
        base, wrong = CHAT, _chat_wrong()
        surrogate = _surrogate(base, "messages.0.content")
    else:
        paths = ["/rollout"]
        base, wrong = ROLLOUT, _rollout_wrong()
        surrogate = _surrogate(base, "policy.components.system_prompt")
    for path in paths:
        for label, body in [*bodies(base, wrong), ("lone surrogate", surrogate)]:
            yield label, "POST", path, JSON, body
        yield "chunked huge body", "POST", path, JSON, _chunks(HUGE)
        yield (
            "text/plain body",
            "POST",
            path,
            {"content-type": "text/plain"},
            json.dumps(base).encode(),
        )
        yield (
            "form body",
            "POST",
            path,
            {"content-type": "application/x-www-form-urlencoded"},
            b"a=1&b=2",
        )
        yield "GET on a POST route", "GET", path, {}, b""
    for path in ("/health", "/v1/models", "/task_info", "/%ff", "/" + "a" * 8000):
        yield "odd GET", "GET", path, {}, b""
