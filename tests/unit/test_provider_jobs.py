"""Jobs against a hosted model's endpoint (a mock on 127.0.0.1 that answers like the
scripted models): a rate-limited start changes nothing of the result, and a wrong key, an
unknown model or a wrong URL ends the job in one line before the seed's evaluation."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jobs_support as js
import pytest
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from emery.config import parse_config
from emery.jobs import JobEngine, create_job, run_job
from emery.lm import throttle
from emery.store import MemoryStore
from emery.store.records import RolloutFilter

pytestmark = pytest.mark.usefixtures("random_search_algorithm")

SCRIPTS = {"task": js.task_lm(), "reflection": js.reflection_lm()}


@dataclass
class Endpoint:
    """What the mock answers: 429s (with ``retry-after-ms``) until ``limited_until``, a
    ``status`` for every call when set; what it saw."""

    limited_until: float = 0.0
    status: int | None = None
    chat_calls: int = 0
    limited: int = 0
    models: list[str] = field(default_factory=list)


def _app(state: Endpoint) -> FastAPI:
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def completions(request: Request) -> JSONResponse:
        body: dict[str, Any] = await request.json()
        state.models.append(body["model"])
        if state.status is not None:
            error = {"error": {"message": "refused", "type": "invalid_request_error"}}
            return JSONResponse(status_code=state.status, content=error)
        if time.monotonic() < state.limited_until:
            state.limited += 1
            error = {"error": {"message": "slow down", "type": "rate_limit_error"}}
            return JSONResponse(status_code=429, content=error, headers={"retry-after-ms": "200"})
        state.chat_calls += 1
        completion = await SCRIPTS[body["model"]].complete(body["messages"])
        return JSONResponse(
            {
                "model": body["model"],
                "choices": [{"message": {"content": completion.text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 2},
            }
        )

    return app


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, Endpoint]]:
    state = Endpoint()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(
        uvicorn.Config(_app(state), log_level="warning", lifespan="off", access_log=False)
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}/v1", state
    server.should_exit = True
    thread.join(timeout=10)
    sock.close()


@pytest.fixture
def endpoint(served: tuple[str, Endpoint], monkeypatch: pytest.MonkeyPatch) -> tuple[str, Endpoint]:
    monkeypatch.setattr(throttle, "_registry", {})  # each job's models paced on their own
    base_url, state = served
    state.limited_until, state.status = 0.0, None
    state.chat_calls = state.limited = 0
    state.models.clear()
    return base_url, state


def _run(tmp_path: Path, base_url: str, **task: Any) -> tuple[MemoryStore, Any]:
    config = js.search_config(tmp_path / ".emery", iterations=3)
    config["runtime"]["cache"] = False
    config["lm"] = {
        role: {"model": f"openai/{role}", "base_url": base_url, "concurrency": 8, **task}
        for role in ("task", "reflection")
    }
    store = MemoryStore()
    job_id = create_job(store, parse_config(config), base_dir=tmp_path).id
    return store, run_job(store, job_id, engine=JobEngine(store, job_id))


def test_a_rate_limited_start_ends_with_the_same_scores(
    tmp_path: Path, endpoint: tuple[str, Endpoint]
) -> None:
    base_url, state = endpoint
    store, job = _run(tmp_path / "free", base_url)
    assert job.state == "succeeded"
    free = js.stored_scores(store, job.id)
    assert len(free) > 8  # the seed on val and the search's candidates

    state.limited_until = time.monotonic() + 1.5  # every call rate-limited for 1.5 s
    start = time.monotonic()
    store, limited = _run(tmp_path / "limited", base_url, max_attempts=1)
    assert limited.state == "succeeded"
    assert state.limited > 0
    assert time.monotonic() - start >= 1.5
    assert js.stored_scores(store, limited.id) == free
    assert (limited.best_candidate_id, limited.best_score) == (
        job.best_candidate_id,
        job.best_score,
    )
    rollouts = store.list_rollouts(RolloutFilter(job_id=limited.id), limit=None).items
    assert rollouts
    assert [r for r in rollouts if r.status != "succeeded"] == []
    task = {(t.model, t.role): t for t in store.tallies().lm}[("openai/task", "task")]
    assert task.rate_limited > 0  # the waits reach the job's usage, and /metrics
    assert task.rate_limit_wait_s >= 0.19 * task.rate_limited  # each waits its 200 ms


@pytest.mark.parametrize(
    ("status", "says"),
    [(401, "API key was refused (401"), (404, "no such model or endpoint (404")],
)
def test_a_refused_key_or_model_fails_the_job_before_the_seed(
    tmp_path: Path, endpoint: tuple[str, Endpoint], status: int, says: str
) -> None:
    base_url, state = endpoint
    state.status = status
    store, job = _run(tmp_path, base_url)
    assert job.state == "failed"
    assert job.error.startswith("lm.task: openai/task: ")
    assert says in job.error
    assert "\n" not in job.error
    assert sorted(state.models) == ["reflection", "task"]  # one check call each, no rollout
    assert store.list_rollouts(RolloutFilter(job_id=job.id)).items == []


def test_a_wrong_url_fails_the_job_before_the_seed(tmp_path: Path) -> None:
    store, job = _run(tmp_path, "http://127.0.0.1:9/v1")
    assert job.state == "failed"
    assert job.error.startswith("lm.task: openai/task: cannot reach http://127.0.0.1:9/v1 (")
    assert job.error.endswith("check the model's base_url")
    assert store.list_rollouts(RolloutFilter(job_id=job.id)).items == []
