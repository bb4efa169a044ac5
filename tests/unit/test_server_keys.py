"""Keys with scopes on ``emery server``: the API key reaches every route; a read key reads
(GET and HEAD on /api/*, /metrics, the dashboard, event streams); a submit key also
creates, pauses, resumes and cancels jobs; a runner key reaches /api/queue only. A refused
request is a 403 with one line saying what the key may do."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from server_support import finished_job, job_config, random_search_module
from typer.testing import CliRunner

from emery.cli.app import app as cli_app
from emery.core.errors import ConfigError
from emery.proxy.guards import Grant
from emery.server.api import create_server_app
from emery.server.keys import scoped_keys
from emery.server.launcher import ThreadLauncher
from emery.store import MemoryStore

__all__ = ["random_search_module"]

ADMIN, READ, SUBMIT, RUNNER, APP = "admin-key", "read-key", "submit-key", "runner-key", "app-key"

Request = tuple[str, str, dict[str, Any] | None]


def reads(job: str) -> list[Request]:
    """Requests that change nothing: every key but the runner's may make them."""
    return [
        ("GET", "/api/jobs", None),
        ("GET", f"/api/jobs/{job}", None),
        ("GET", f"/api/jobs/{job}/events", None),
        ("GET", f"/api/jobs/{job}/events/stream", None),
        ("GET", f"/api/jobs/{job}/candidates", None),
        ("GET", f"/api/jobs/{job}/scores", None),
        ("GET", f"/api/jobs/{job}/result", None),
        ("GET", f"/api/jobs/{job}/approvals", None),
        ("GET", "/api/workers", None),
        ("GET", "/api/prompts", None),
        ("GET", "/metrics", None),
        ("GET", "/", None),
        ("GET", "/static/app.js", None),
        ("GET", "/openapi.json", None),
    ]


def submits(job: str, workdir: Path) -> list[Request]:
    """Requests that make or steer jobs: the submit key's and the admin's."""
    body = {"config": job_config(workdir, iterations=1), "start": False}
    return [
        ("POST", "/api/jobs", body),
        ("POST", f"/api/jobs/{job}/pause", None),
        ("POST", f"/api/jobs/{job}/resume", None),
        ("POST", f"/api/jobs/{job}/cancel", None),
    ]


def admin_only(job: str) -> list[Request]:
    """Requests only the admin key may make (the queue's: the runner's too)."""
    return [
        ("POST", "/api/queue/claim", {"worker_id": "w1"}),
        ("POST", "/api/approvals/a-1", {"action": "approve"}),
        ("POST", "/api/feedback", {"trace_id": "0" * 32, "score": 1.0}),
        ("POST", "/api/datasets/from-traces", {}),
        ("POST", "/v1/traces", {"resourceSpans": []}),
        ("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}),
        ("POST", "/systems/no-such-prompt/run", {"input": {"question": "1 + 1?"}}),
    ]


@pytest.fixture(scope="module")
def server(
    random_search_module: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[TestClient, str, Path]]:
    workdir = tmp_path_factory.mktemp("keys")
    store = MemoryStore()
    job = finished_job(store, workdir, iterations=1)
    launcher = ThreadLauncher()
    app = create_server_app(
        store,
        api_key=ADMIN,
        read_key=READ,
        submit_key=SUBMIT,
        runner_key=RUNNER,
        app_key=APP,
        launcher=launcher,
        base_dir=workdir,
        allow_code=True,
    )
    with TestClient(app) as client:
        yield client, job, workdir
    launcher.join()


def send(client: TestClient, key: str, request: Request) -> Any:
    method, path, body = request
    return client.request(method, path, json=body, headers={"Authorization": f"Bearer {key}"})


def assert_allowed(client: TestClient, key: str, requests: list[Request]) -> None:
    for request in requests:
        status = send(client, key, request).status_code
        assert status not in (401, 403), (key, request[:2], status)


def assert_refused(client: TestClient, key: str, requests: list[Request], says: str) -> None:
    for request in requests:
        response = send(client, key, request)
        assert response.status_code == 403, (key, request[:2], response.status_code)
        detail = response.json()["detail"]
        assert "\n" not in detail, detail
        assert detail.startswith(says), detail


def test_the_read_key_reads_and_changes_nothing(server: tuple[TestClient, str, Path]) -> None:
    client, job, workdir = server
    assert_allowed(client, READ, reads(job))
    says = "this is a read-only key: it may GET and HEAD on /api/*"
    assert_refused(client, READ, submits(job, workdir) + admin_only(job), says)
    assert client.head("/metrics", headers={"X-API-Key": READ}).status_code not in (401, 403)


def test_the_submit_key_also_makes_and_steers_jobs(server: tuple[TestClient, str, Path]) -> None:
    client, job, workdir = server
    assert_allowed(client, SUBMIT, reads(job) + submits(job, workdir))
    says = "this is a submit key: it may GET and HEAD on /api/*"
    assert_refused(client, SUBMIT, admin_only(job), says)
    made = send(client, SUBMIT, submits(job, workdir)[0])
    assert made.status_code == 201
    assert made.json()["state"] == "created"


def test_the_runner_key_reaches_the_queue_only(server: tuple[TestClient, str, Path]) -> None:
    client, job, workdir = server
    assert_allowed(client, RUNNER, [admin_only(job)[0]])
    says = "this is a runner key: it may reach /api/queue only"
    assert_refused(client, RUNNER, reads(job) + submits(job, workdir) + admin_only(job)[1:], says)


def test_the_application_key_reaches_what_an_application_calls(
    server: tuple[TestClient, str, Path],
) -> None:
    client, job, workdir = server
    calls = [admin_only(job)[i] for i in (2, 4, 5, 6)] + [("GET", "/api/prompts", None)]
    assert_allowed(client, APP, calls)
    says = "this is an application key: it may run published systems"
    others = [r for r in reads(job) if r[1] != "/api/prompts"]
    assert_refused(client, APP, others + submits(job, workdir) + admin_only(job)[:2], says)


def test_the_api_key_reaches_every_route(server: tuple[TestClient, str, Path]) -> None:
    client, job, workdir = server
    assert_allowed(client, ADMIN, reads(job) + submits(job, workdir) + admin_only(job))


def test_a_wrong_or_missing_key_is_still_a_401(server: tuple[TestClient, str, Path]) -> None:
    client, job, _ = server
    assert send(client, "no-such-key", ("GET", "/api/jobs", None)).status_code == 401
    assert client.get(f"/api/jobs/{job}").status_code == 401
    assert client.get("/health").status_code == 200


def test_a_browser_signs_in_with_a_read_key_and_reads_only(
    server: tuple[TestClient, str, Path],
) -> None:
    client, job, _ = server
    with TestClient(client.app) as browser:
        assert browser.post("/login", data={"key": RUNNER}).status_code == 401
        signed_in = browser.post("/login", data={"key": READ}, follow_redirects=False)
        assert signed_in.status_code == 303
        assert "emery_key" in signed_in.cookies
        assert browser.get(f"/api/jobs/{job}/candidates").status_code == 200
        refused = browser.post(f"/api/jobs/{job}/pause")
        assert refused.status_code == 403
        assert refused.json()["error"]["type"] == "permission_error"


def test_keys_beside_no_api_key_or_alike_are_refused() -> None:
    with pytest.raises(ConfigError, match="a read-only key needs an API key"):
        scoped_keys(None, read_key=READ)
    with pytest.raises(ConfigError, match="the submit key is the read-only key"):
        scoped_keys(ADMIN, read_key=READ, submit_key=READ)
    with pytest.raises(ConfigError, match="the runner key is the API key"):
        create_server_app(MemoryStore(), api_key=ADMIN, runner_key=ADMIN)


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("POST", "/api/jobs/j-1/pause", True),
        ("post", "/api/jobs/j-1/resume/", True),
        ("GET", "/api/jobs/j-1/pause", False),
        ("POST", "/api/jobs/pause", False),
        ("POST", "/api/jobs//pause", False),
        ("POST", "/api/jobs/j-1/x/pause", False),
        ("POST", "/api/jobsx", False),
        ("POST", "/api/jobs", True),
    ],
)
def test_a_grant_matches_methods_and_path_segments(method: str, path: str, allowed: bool) -> None:
    grant = Grant(frozenset({"POST"}), ("/api/jobs", "/api/jobs/*/pause", "/api/jobs/*/resume"))
    assert grant.allows(method, path) is allowed


def test_a_trailing_double_star_names_a_path_and_all_under_it() -> None:
    grant = Grant(frozenset(), ("/api/**",))
    assert grant.allows("DELETE", "/api")
    assert grant.allows("GET", "/api/a/b/c")
    assert not grant.allows("GET", "/apix")
    assert not grant.allows("GET", "/")


def test_server_help_names_the_keys() -> None:
    shown = CliRunner().invoke(cli_app, ["server", "--help"], env={"COLUMNS": "120"})
    assert shown.exit_code == 0
    for name in ("EMERY_READ_KEY", "EMERY_SUBMIT_KEY", "EMERY_RUNNER_KEY", "--read-key-env"):
        assert name in shown.stdout
