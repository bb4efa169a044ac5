"""The ``emery server`` application: the REST API over a store, the SSE event streams,
OTLP trace ingest, the LM proxy routes of ``emery proxy`` and the dashboard, in one app.
Here the proxy records the calls of applications (``/v1``, ``/prompts/NAME/v1``) in the
store as application traces.

Guards: with an API key, every route but ``/health`` and ``/login`` needs a key (header, or
the dashboard's cookie), checked before the body is read: the API key reaches every route,
a read, submit or runner key what its scope grants (``server/keys.py``, 403 beyond it);
bodies over the limit get 413;
no CORS headers are sent, so other origins' pages cannot read the API; every error is
JSON with a message, never a stack trace.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI

from emery.lm.base import LM
from emery.proxy.guards import MAX_BODY_BYTES, ApiKeyMiddleware, BodyLimitMiddleware
from emery.proxy.routes import LiveBackend, proxy_router
from emery.server.approvals_api import approvals_router
from emery.server.dashboard import KEY_COOKIE, dashboard_router
from emery.server.errors import API_ERRORS, PROXY_ERRORS, install_error_handlers, json_error
from emery.server.jobs_api import jobs_router
from emery.server.keys import scoped_keys
from emery.server.launcher import JobLauncher, launcher_for
from emery.server.metrics import metrics_router
from emery.server.otlp_route import otlp_router
from emery.server.prompts_api import prompt_proxy_router, prompts_router
from emery.server.queue_api import queue_router
from emery.server.results_api import candidates_router, rollouts_router
from emery.server.systems_api import systems_router
from emery.server.traces_api import traces_router
from emery.server.workers_api import workers_router
from emery.store.protocol import Store
from emery.tracing.registry import LiveRollouts

OPEN_PATHS = frozenset({"/health", "/login"})


def create_server_app(
    store: Store,
    *,
    api_key: str | None = None,
    runner_key: str | None = None,
    read_key: str | None = None,
    submit_key: str | None = None,
    app_key: str | None = None,
    default_lm: LM | None = None,
    launcher: JobLauncher | None = None,
    base_dir: Path | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
    allow_code: bool = False,
) -> FastAPI:
    """The server over ``store``. Jobs created or resumed through it run with
    ``launcher`` (default: job processes; threads for an in-memory store); relative
    paths in created configs are under ``base_dir`` (default: the working folder). A
    config that runs code on this host (``config.code_settings``) is refused unless
    ``allow_code``. Beside an ``api_key`` (every route), ``read_key`` reads (``GET`` and
    ``HEAD``), ``submit_key`` also creates, pauses, resumes and cancels jobs,
    ``runner_key`` reaches ``/api/queue`` only (what ``emery runner --server`` needs) and
    ``app_key`` what an application calls (``server.keys``)."""
    scoped = scoped_keys(
        api_key,
        runner_key=runner_key,
        read_key=read_key,
        submit_key=submit_key,
        app_key=app_key,
    )
    app = FastAPI(
        title="emery",
        version="0.1.0",
        description="Jobs, candidates, evaluations, rollouts and traces of an emery store.",
    )
    app.state.store = store
    app.state.launcher = launcher or launcher_for(store)
    app.state.registry = LiveRollouts()
    backend = LiveBackend(app.state.registry, default_lm, sink=store)  # records app calls

    @app.get("/health", tags=["server"])
    def health() -> dict[str, object]:
        """Liveness, the store behind the server and the proxy's default model."""
        lm = backend.default_lm()
        return {
            "status": "ok",
            "store": store.url.split("://", 1)[0],
            "model": lm.model if lm is not None else None,
        }

    base = (base_dir or Path.cwd()).resolve()
    for router in (
        queue_router(store),  # first: the runners' requests are matched before any other
        jobs_router(store, app.state.launcher, base, allow_code=allow_code),
        candidates_router(store),
        rollouts_router(store),
        prompts_router(store),
        otlp_router(store),
        traces_router(store),
        approvals_router(store),
        workers_router(store),
        metrics_router(store),
        systems_router(store),
    ):
        app.include_router(router, responses=API_ERRORS)
    app.include_router(proxy_router(backend), responses=PROXY_ERRORS)
    app.include_router(prompt_proxy_router(store, backend), responses=PROXY_ERRORS)
    app.include_router(dashboard_router(api_key, other_keys=(read_key, submit_key)))
    install_error_handlers(app)
    app.add_middleware(BodyLimitMiddleware, max_bytes=max_body_bytes, render=json_error)
    if api_key is not None:  # added last: runs first, before the body limit reads anything
        app.add_middleware(
            ApiKeyMiddleware,
            key=api_key,
            open_paths=OPEN_PATHS,
            render=json_error,
            cookie=KEY_COOKIE,
            scoped=scoped,
        )
    return app
