"""What every emery HTTP server puts in front of its routes: an API key checked before the
body is read, a body size limit, and a refusal to listen off loopback without a key."""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from starlette.requests import HTTPConnection, Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from emery.core.errors import ConfigError

API_KEY_HEADER = "X-API-Key"
MAX_BODY_BYTES = 4 * 1024 * 1024
OPEN_PATHS = frozenset({"/health"})

ErrorRenderer = Callable[[int, str], Response]


def plain_error(status: int, message: str) -> Response:
    """FastAPI's error shape: ``{"detail": message}``."""
    return JSONResponse({"detail": message}, status_code=status)


def has_lone_surrogate(data: Any) -> bool:
    """Whether JSON-like ``data`` holds a string that is not valid unicode (a lone UTF-16
    surrogate from a ``\\ud800`` escape), which no model or UTF-8 encoder accepts."""
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def refuse_open_binding(host: str, key: str | None, how_to_set: str) -> None:
    """ConfigError when a server would listen off loopback without an API key."""
    if key is None and not is_loopback(host):
        raise ConfigError(
            f"refusing to listen on {host} without an API key: {how_to_set}, or listen on 127.0.0.1"
        )


def given_key(connection: HTTPConnection, cookie: str | None = None) -> str | None:
    """The key a request carries: ``X-API-Key``, else ``Authorization: Bearer``, else the
    ``cookie`` named (a browser's, when the server sets one)."""
    key = connection.headers.get(API_KEY_HEADER)
    if key:
        return key
    scheme, _, token = connection.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    if cookie is None:
        return None
    return connection.cookies.get(cookie) or None


def key_matches(given: str | None, key: str) -> bool:
    """A constant-time comparison of the given key with the expected one."""
    return given is not None and hmac.compare_digest(given.encode(), key.encode())


@dataclass(frozen=True)
class Grant:
    """Requests of one of ``methods`` (empty: any method) on a path that one of ``paths``
    names. A path pattern is matched segment by segment: ``*`` stands for one segment and a
    last ``**`` for any number (none included), so ``/api/**`` names ``/api`` and every path
    under it, and ``/api/jobs/*/pause`` the pause route of any job."""

    methods: frozenset[str]
    paths: tuple[str, ...]

    def allows(self, method: str, path: str) -> bool:
        if self.methods and method.upper() not in self.methods:
            return False
        segments = path.strip("/").split("/")
        return any(_matches(pattern.strip("/").split("/"), segments) for pattern in self.paths)


def _matches(pattern: list[str], segments: list[str]) -> bool:
    """Whether path ``segments`` fit ``pattern`` (``*``: one segment, last ``**``: the rest)."""
    if pattern and pattern[-1] == "**":
        head = pattern[:-1]
        return len(segments) >= len(head) and _matches(head, segments[: len(head)])
    if len(pattern) != len(segments):
        return False
    return all(
        part == segment or (part == "*" and segment != "")
        for part, segment in zip(pattern, segments, strict=True)
    )


@dataclass(frozen=True)
class KeyScope:
    """What a key other than the admin key may do: the requests one of its ``grants``
    allows; ``says`` is the one line a refused request is answered with (403)."""

    name: str
    grants: tuple[Grant, ...]
    says: str

    def allows(self, method: str, path: str) -> bool:
        return any(grant.allows(method, path) for grant in self.grants)

    def refusal(self) -> str:
        article = "an" if self.name[:1] in "aeiou" else "a"
        return f"this is {article} {self.name} key: {self.says}"


class ApiKeyMiddleware:
    """Refuses (401) every HTTP request but ``open_paths`` without a key, before the app
    reads its body. ``key`` may make every request; a key of ``scoped`` (key → ``KeyScope``)
    only those its scope allows (403 with the scope's line for the others)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        key: str,
        open_paths: Collection[str] = OPEN_PATHS,
        render: ErrorRenderer = plain_error,
        cookie: str | None = None,
        scoped: Mapping[str, KeyScope] | None = None,
    ) -> None:
        self.app, self.key, self.open_paths, self.render = app, key, open_paths, render
        self.cookie = cookie
        self.scoped = dict(scoped or {})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        refusal = self._refusal(scope) if scope["type"] == "http" else None
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _refusal(self, scope: Scope) -> Response | None:
        """The answer to a request its key may not make (None: let it through)."""
        path = scope["path"]
        given = given_key(HTTPConnection(scope), self.cookie)
        if path in self.open_paths or key_matches(given, self.key):
            return None
        for key, granted in self.scoped.items():
            if key_matches(given, key):
                if granted.allows(scope["method"], path):
                    return None
                return self.render(403, granted.refusal())
        response = self.render(401, "invalid or missing API key")
        response.headers["WWW-Authenticate"] = "Bearer"
        return response


class _TooLarge(Exception):
    pass


class BodyLimitMiddleware:
    """Answers 413 to a request body over ``max_bytes`` (by its Content-Length, or as it
    streams in), so no route holds more than that in memory."""

    def __init__(
        self, app: ASGIApp, *, max_bytes: int = MAX_BODY_BYTES, render: ErrorRenderer = plain_error
    ) -> None:
        self.app, self.max_bytes, self.render = app, max_bytes, render

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = HTTPConnection(scope).headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(scope, receive, send)
            return
        seen = 0
        started = False

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.max_bytes:
                raise _TooLarge
            return message

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, tracked)
        except _TooLarge:
            if started:
                raise
            await self._refuse(scope, receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        message = f"the request body is over {self.max_bytes} bytes"
        await self.render(413, message)(scope, receive, send)


def _printable(value: Any) -> str | int:
    """A location part or message as JSON can always write it: lone surrogates escaped."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return str(value).encode("utf-8", "backslashreplace").decode("utf-8")


async def validation_error(request: Request, exc: Exception) -> Response:
    """422 naming each invalid field (location, message, type) without echoing its value:
    a value may be NaN, an infinity or a lone surrogate, which no JSON encoder writes."""
    errors = exc.errors() if isinstance(exc, RequestValidationError) else []
    detail = [
        {
            "type": _printable(error.get("type", "")),
            "loc": [_printable(part) for part in error.get("loc", ())],
            "msg": _printable(error.get("msg", "")),
        }
        for error in errors
    ]
    return JSONResponse({"detail": detail}, status_code=422)


def render_validation_errors(app: FastAPI) -> None:
    """Make ``app`` answer invalid requests with ``validation_error``."""
    app.add_exception_handler(RequestValidationError, validation_error)
