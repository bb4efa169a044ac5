"""``emery taskapp serve module:agent``: host a Python agent as a task app."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from emery.cli.console import err
from emery.core.imports import import_object
from emery.proxy.guards import refuse_open_binding
from emery.systems.task_app_protocol import API_KEY_ENV

app = typer.Typer(help="Host agents as task apps (agents behind HTTP).", no_args_is_help=True)


@app.command("serve")
def serve(
    agent: Annotated[str, typer.Argument(metavar="MODULE:AGENT", help="The agent function.")],
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port to listen on.")] = 8500,
    name: Annotated[str | None, typer.Option(help="Name reported by /task_info.")] = None,
    api_key_env: Annotated[
        str,
        typer.Option(
            help="Environment variable holding the API key (unset: no key, loopback only)."
        ),
    ] = API_KEY_ENV,
    component: Annotated[
        list[str] | None,
        typer.Option(
            "--component",
            help="A module-level string or PromptTemplate of the agent's module to optimize"
            " (repeatable; default: what @emery.agent declares).",
        ),
    ] = None,
    app_dir: Annotated[Path, typer.Option(help="Directory MODULE is imported from.")] = Path("."),
) -> None:
    """Serve MODULE:AGENT with GET /health, GET /task_info and POST /rollout.

    The agent may be plain OpenAI SDK code: inside a rollout its OpenAI calls go to the
    job's LM proxy, whatever OPENAI_BASE_URL says.
    """
    from emery.systems.function_agent import FunctionAgent
    from emery.taskapp.server import serve as serve_app

    refuse_open_binding(host, os.environ.get(api_key_env) or None, f"set ${api_key_env}")
    sys.path.insert(0, str(app_dir.resolve()))
    # A plain OpenAI client refuses to start without a key; the proxy needs none.
    os.environ.setdefault("OPENAI_API_KEY", "emery-task-app")
    target = FunctionAgent(import_object(agent), components=component or None, name=name)
    components = ", ".join(target.seed_texts()) or "none"
    err.print(f"task app {target.name} on http://{host}:{port} (components: {components})")
    serve_app(target, host=host, port=port, name=name, api_key_env=api_key_env)
