"""``emery server``: the HTTP API, SSE, OTLP ingest, LM proxy and dashboard over a store."""

from __future__ import annotations

import os
from typing import Annotated

import typer
import uvicorn

from emery.cli.common import StoreOption, open_cli_store
from emery.cli.console import err
from emery.cli.proxy_cmd import API_KEY_ENV, task_model
from emery.proxy.guards import MAX_BODY_BYTES, refuse_open_binding
from emery.server.api import create_server_app
from emery.server.keys import APP_KEY_ENV, READ_KEY_ENV, SUBMIT_KEY_ENV
from emery.workers.http_queue import RUNNER_KEY_ENV


def server(
    host: Annotated[
        str, typer.Option(help="Interface to listen on; any but loopback needs an API key.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port to listen on.")] = 8420,
    model: Annotated[
        str | None,
        typer.Option(help="Model behind the LM proxy's /v1 routes, e.g. local/qwen2.5-coder-0.5b."),
    ] = None,
    api_key_env: Annotated[
        str,
        typer.Option(
            help="Environment variable holding the API key, the admin key: every route but"
            " /health and /login requires a key, and this one reaches them all (unset: no"
            " key, and only loopback hosts are allowed)."
        ),
    ] = API_KEY_ENV,
    runner_key_env: Annotated[
        str,
        typer.Option(
            help="Environment variable holding a runner key: it reaches /api/queue only"
            " (emery runner --server), not the jobs, data or traces. Needs an API key."
        ),
    ] = RUNNER_KEY_ENV,
    read_key_env: Annotated[
        str,
        typer.Option(
            help="Environment variable holding a read-only key: GET and HEAD on /api/*,"
            " /metrics, the dashboard and its event streams; 403 on anything that changes"
            " state. Needs an API key."
        ),
    ] = READ_KEY_ENV,
    submit_key_env: Annotated[
        str,
        typer.Option(
            help="Environment variable holding a submit key: what the read key may, and"
            " create jobs (POST /api/jobs) and pause, resume or cancel them; not /api/queue,"
            " approval decisions or publishing. Needs an API key."
        ),
    ] = SUBMIT_KEY_ENV,
    app_key_env: Annotated[
        str,
        typer.Option(
            help="Environment variable holding an application key: POST /systems/NAME/run,"
            " GET /api/prompts, the LM proxy, feedback and trace ingest; not the jobs or"
            " the queue. Needs an API key."
        ),
    ] = APP_KEY_ENV,
    max_body_mb: Annotated[
        float, typer.Option(min=0.001, help="Largest request body in MiB (413 above).")
    ] = MAX_BODY_BYTES / 2**20,
    allow_code: Annotated[
        bool,
        typer.Option(
            "--allow-code",
            help="Take configs over HTTP that run code on this host (module:attr names,"
            " python/ models, function agents, harness and graph code, code_tests); that"
            " code runs with this server's permissions.",
        ),
    ] = False,
    store_location: StoreOption = None,
) -> None:
    """Serve the jobs in a store over HTTP, with a live dashboard at /.

    \b
    /api/jobs             list (filters, paging), create from a config
    /api/jobs/J           get; POST .../pause, .../resume, .../cancel
    /api/jobs/J/events    events after ?since=N; .../events/stream: SSE
    /api/jobs/J/candidates  lineage, split scores, .../C/diff
    /api/jobs/J/evaluations, /api/jobs/J/rollouts
    /api/rollouts/R       attempts; /api/rollouts/R/spans: span tree
    /api/queue/...        the rollout queue of `emery runner --server`
    /systems/NAME/run     a published system run whole on posted inputs
    /v1/traces            OTLP/HTTP trace ingest (protobuf or JSON)
    /v1/chat/completions  the LM proxy (as `emery proxy` serves it alone)
    /docs, /openapi.json  the API's schema

    Off loopback an API key ($EMERY_API_KEY) is required: send it as
    `Authorization: Bearer KEY` or `X-API-Key`; a browser signs in at
    /login. The API key is the admin key (every route). Keys that may do
    less, each set beside it (403 beyond what the key may do):

    \b
      $EMERY_READ_KEY    GET/HEAD on /api/*, /metrics, the dashboard, SSE
      $EMERY_SUBMIT_KEY  read, plus POST /api/jobs and pause/resume/cancel
      $EMERY_RUNNER_KEY  /api/queue only (emery runner --server)
      $EMERY_APP_KEY     /systems/NAME/run, prompts, LM proxy, feedback, traces

    Jobs created or resumed here run in job processes (threads for a
    memory:// store). A posted config that would run code
    on this host is refused unless --allow-code.
    """
    key = os.environ.get(api_key_env) or None
    refuse_open_binding(host, key, f"set ${api_key_env}")
    runner_key = os.environ.get(runner_key_env) or None
    read_key = os.environ.get(read_key_env) or None
    submit_key = os.environ.get(submit_key_env) or None
    app_key = os.environ.get(app_key_env) or None
    store = open_cli_store(store_location)
    lm = task_model(model, None, None, store_location)
    app = create_server_app(
        store,
        api_key=key,
        runner_key=runner_key,
        read_key=read_key,
        submit_key=submit_key,
        app_key=app_key,
        default_lm=lm,
        max_body_bytes=int(max_body_mb * 2**20),
        allow_code=allow_code,
    )
    where = f"http://{host}:{port}"
    notes = ", API key required" if key else ""
    err.print(
        f"emery server on {where} (dashboard at {where}/, API at {where}/docs{notes})",
        soft_wrap=True,
    )
    uvicorn.run(app, host=host, port=port, log_level="warning")
