"""The dashboard: one HTML page with a small vanilla script (package data, no build step)
that reads the API; and, when the server has an API key, a login form that puts the key
(the API key, or a read or submit key) in an HttpOnly, SameSite=Strict cookie so the
browser's own requests carry it."""

from __future__ import annotations

import html
from collections.abc import Iterable
from importlib import resources
from urllib.parse import parse_qs

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from emery.proxy.guards import key_matches
from emery.store.states import NotFound

KEY_COOKIE = "emery_key"
ASSETS = {
    "app.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
    "chart.js": "text/javascript; charset=utf-8",
    "approvals.js": "text/javascript; charset=utf-8",
}
_SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-cache",
}

LOGIN_PAGE = """<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>emery · sign in</title><link rel="stylesheet" href="/static/app.css"></head>
<body><main class="login"><h1>emery</h1><p>{message}</p>
<form method="post" action="/login"><label>API key
<input type="password" name="key" autocomplete="current-password" autofocus></label>
<button type="submit">Sign in</button></form></main></body></html>"""


def _asset(name: str) -> str:
    return resources.files("emery.server").joinpath("static", name).read_text("utf-8")


def dashboard_router(api_key: str | None, *, other_keys: Iterable[str | None] = ()) -> APIRouter:
    """``/`` (the dashboard), ``/static/*`` and ``/login``, where a browser signs in with
    ``api_key`` or one of ``other_keys`` (a read or submit key; None ones left out)."""
    router = APIRouter(include_in_schema=False)
    sign_in_keys = [key for key in (api_key, *other_keys) if key]

    @router.get("/")
    def index() -> Response:
        return HTMLResponse(_asset("index.html"), headers=_SECURITY_HEADERS)

    @router.get("/static/{name}")
    def asset(name: str) -> Response:
        if name not in ASSETS:
            raise NotFound(f"no dashboard file {name!r}")
        return Response(_asset(name), media_type=ASSETS[name], headers=_SECURITY_HEADERS)

    @router.get("/login")
    def login_form() -> Response:
        message = "Enter this server's API key." if api_key else "This server needs no key."
        return HTMLResponse(LOGIN_PAGE.format(message=html.escape(message)))

    @router.post("/login")
    async def login(request: Request) -> Response:
        if api_key is None:
            return RedirectResponse("/", status_code=303)
        form = parse_qs((await request.body()).decode("utf-8", "replace"))
        given = (form.get("key") or [""])[0]
        if not any(key_matches(given, key) for key in sign_in_keys):
            page = LOGIN_PAGE.format(message="That key is not this server's. Try again.")
            return HTMLResponse(page, status_code=401)
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(KEY_COOKIE, given, httponly=True, samesite="strict")
        return response

    return router
