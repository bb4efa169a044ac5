"""``emery proxy``: the LM proxy alone (health and the OpenAI-compatible ``/v1``), no store;
``emery server`` mounts the same routes beside the API over a store. ``emery serve`` is
this command's old name, a hidden alias until the next release."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer
import uvicorn

from emery.cli.common import StoreOption, open_cli_store, resolve
from emery.cli.console import err
from emery.config.loading import load_config
from emery.config.resolve import build_models, open_cache, resolve_lm
from emery.config.schema import JobConfig
from emery.core.errors import ConfigError
from emery.lm.base import LM
from emery.lm.config import LMConfig
from emery.proxy.app import create_app
from emery.proxy.guards import refuse_open_binding

API_KEY_ENV = "EMERY_API_KEY"


def task_model(
    model: str | None,
    config_path: Path | None,
    job: str | None,
    store_location: str | None,
    threads: int | None = None,
) -> LM | None:
    """The model ``/v1`` forwards to: ``--model`` (on ``threads`` llama.cpp threads for a
    local one), a config's task model, or a job's."""
    options = (("--model", model), ("--config", config_path), ("--job", job))
    given = [name for name, value in options if value]
    if len(given) > 1:
        raise ConfigError(f"give one of --model, --config or --job, not {' and '.join(given)}")
    if threads is not None and model is None:
        raise ConfigError("--threads applies to --model (a config's model sets its own n_threads)")
    if model is not None:
        return resolve_lm(LMConfig(model=model, n_threads=threads))
    config: JobConfig | None = None
    base_dir = Path.cwd()
    if config_path is not None:
        config, base_dir = load_config(config_path), config_path.parent
    elif job is not None:
        from emery.config.loading import job_config

        store = open_cli_store(store_location)
        record = store.get_job(resolve(store, job))
        config = job_config(record)
        base_dir = Path(record.base_dir) if record.base_dir else base_dir
    if config is None:
        return None
    models = build_models(config, roles=("task",), cache=open_cache(config, base_dir))
    return models["task"]


def proxy(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port to listen on.")] = 8400,
    model: Annotated[
        str | None, typer.Option(help="Model behind /v1, e.g. local/qwen2.5-coder-0.5b.")
    ] = None,
    config_path: Annotated[
        Path | None, typer.Option("--config", help="Use this job config's task model.")
    ] = None,
    job: Annotated[str | None, typer.Option(help="Use this stored job's task model.")] = None,
    threads: Annotated[
        int | None,
        typer.Option(min=1, help="llama.cpp threads for a local --model (default: every core)."),
    ] = None,
    api_key_env: Annotated[
        str,
        typer.Option(
            help="Environment variable holding the API key every route but /health requires"
            " (unset: no key, and only loopback hosts are allowed)."
        ),
    ] = API_KEY_ENV,
    store_location: StoreOption = None,
) -> None:
    """Run the OpenAI-compatible LM proxy alone (/v1/chat/completions, /v1/models, /health).

    Calls under /rollouts/{rollout}/attempts/{attempt}/v1 are recorded as spans of that
    attempt while it runs in this server; other rollout ids are refused with 404.
    Listening off loopback needs an API key ($EMERY_API_KEY); clients send it as
    `Authorization: Bearer KEY` (the OpenAI SDK's `api_key`) or `X-API-Key`.
    """
    key = os.environ.get(api_key_env) or None
    refuse_open_binding(host, key, f"set ${api_key_env}")
    lm = task_model(model, config_path, job, store_location, threads)
    where = f"http://{host}:{port}"
    behind = f"model {lm.model}" if lm is not None else "no default model"
    behind += ", API key required" if key else ""
    err.print(f"emery proxy on {where} (LM proxy at {where}/v1, {behind})")
    uvicorn.run(create_app(default_lm=lm, api_key=key), host=host, port=port, log_level="warning")
