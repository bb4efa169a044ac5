"""``emery server``'s guards: loopback unless keyed, a key on every route but /health,
a body limit, no CORS, and errors as one JSON line, never a stack trace."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from emery.cli.app import main
from emery.server.api import create_server_app
from emery.server.launcher import ThreadLauncher
from emery.store import MemoryStore

KEY = "s3cret-key"
ROUTES = [
    ("GET", "/api/jobs"),
    ("GET", "/api/jobs/j-x"),
    ("POST", "/api/jobs"),
    ("POST", "/api/jobs/j-x/pause"),
    ("POST", "/api/jobs/j-x/resume"),
    ("POST", "/api/jobs/j-x/cancel"),
    ("GET", "/api/jobs/j-x/events"),
    ("GET", "/api/jobs/j-x/events/stream"),
    ("GET", "/api/jobs/j-x/candidates"),
    ("GET", "/api/jobs/j-x/candidates/c/diff"),
    ("GET", "/api/jobs/j-x/evaluations"),
    ("GET", "/api/jobs/j-x/rollouts"),
    ("GET", "/api/rollouts/ro-x"),
    ("GET", "/api/rollouts/ro-x/spans"),
    ("POST", "/v1/traces"),
    ("POST", "/v1/chat/completions"),
    ("GET", "/v1/models"),
    ("GET", "/openapi.json"),
    ("GET", "/docs"),
]


@pytest.fixture
def keyed() -> TestClient:
    app = create_server_app(MemoryStore(), api_key=KEY, launcher=ThreadLauncher())
    return TestClient(app)


def test_listening_off_loopback_without_a_key_is_refused_in_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("EMERY_API_KEY", raising=False)
    with pytest.raises(SystemExit) as stop:
        main(["server", "--host", "0.0.0.0", "--store", "memory://"])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: refusing to listen on 0.0.0.0 without an API key")
    assert "\n" not in err


@pytest.mark.parametrize(("method", "path"), ROUTES)
def test_every_route_but_health_needs_the_key(keyed: TestClient, method: str, path: str) -> None:
    response = keyed.request(method, path, content=b"x" * 10_000_000)
    assert response.status_code == 401  # before the (oversized) body is read
    assert response.json()["detail"] == "invalid or missing API key"
    wrong = keyed.request(method, path, headers={"X-API-Key": "nope"})
    assert wrong.status_code == 401


def test_the_key_opens_the_routes(keyed: TestClient) -> None:
    assert keyed.get("/health").status_code == 200
    assert keyed.get("/api/jobs", headers={"X-API-Key": KEY}).status_code == 200
    bearer = keyed.get("/api/jobs", headers={"Authorization": f"Bearer {KEY}"})
    assert bearer.status_code == 200
    assert keyed.get("/openapi.json", headers={"X-API-Key": KEY}).json()["paths"]


def test_a_body_over_the_limit_is_413() -> None:
    client = TestClient(create_server_app(MemoryStore(), max_body_bytes=1000))
    response = client.post("/api/jobs", json={"config": {"x": "y" * 2000}})
    assert response.status_code == 413
    assert "over 1000 bytes" in response.json()["detail"]


def test_no_cors_headers_for_other_origins() -> None:
    client = TestClient(create_server_app(MemoryStore()))
    origin = {"Origin": "https://evil.example"}
    assert "access-control-allow-origin" not in client.get("/api/jobs", headers=origin).headers
    preflight = client.options(
        "/api/jobs", headers={**origin, "Access-Control-Request-Method": "POST"}
    )
    assert "access-control-allow-origin" not in preflight.headers


class BrokenStore(MemoryStore):
    def list_jobs(self, *args: object, **kwargs: object) -> object:
        raise RuntimeError("disk on fire at /secret/path")


def test_a_bug_is_a_json_500_without_a_stack_trace() -> None:
    client = TestClient(create_server_app(BrokenStore()), raise_server_exceptions=False)
    response = client.get("/api/jobs")
    assert response.status_code == 500
    assert response.json()["detail"] == "internal error (RuntimeError); see the server log"
    assert "Traceback" not in response.text
    assert "/secret/path" not in response.text


def test_malformed_requests_are_json_4xx() -> None:
    client = TestClient(create_server_app(MemoryStore()))
    invalid = client.post(
        "/api/jobs", content=b"{not json", headers={"Content-Type": "application/json"}
    )
    assert invalid.status_code == 422
    assert invalid.json()["detail"]
    assert client.get("/api/jobs", params={"limit": 0}).status_code == 422
    assert client.get("/no/such/route").json()["detail"] == "Not Found"
    assert client.delete("/api/jobs").status_code == 405


def test_a_browser_signs_in_with_the_key_as_a_strict_cookie(keyed: TestClient) -> None:
    assert keyed.get("/").status_code == 401
    assert keyed.get("/login").status_code == 200
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    wrong = keyed.post("/login", content=b"key=guess", headers=form)
    assert wrong.status_code == 401
    assert "emery_key" not in keyed.cookies
    right = keyed.post(
        "/login", content=f"key={KEY}".encode(), headers=form, follow_redirects=False
    )
    assert right.status_code == 303
    cookie = right.headers["set-cookie"]
    assert "HttpOnly" in cookie
    assert "SameSite=strict" in cookie
    assert keyed.get("/api/jobs").status_code == 200  # the client keeps the cookie
    page = keyed.get("/")
    assert page.status_code == 200
    assert "Content-Security-Policy" in page.headers
    assert keyed.get("/static/app.js").headers["content-type"].startswith("text/javascript")
    assert keyed.get("/static/../guards.py").status_code == 404
    assert keyed.get("/static/secrets.txt").status_code == 404
