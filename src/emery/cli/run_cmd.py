"""``emery run JOB --input '{...}'``: run a job's best (or a chosen) candidate on one input."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from emery.cli.common import StoreOption, open_cli_store, resolve
from emery.cli.console import json_text, printable
from emery.core.aio import run_sync
from emery.core.errors import ConfigError
from emery.reports.inference import run_inference
from emery.store.protocol import Store
from emery.tracing.export import chosen_candidates


def parse_input(text: str) -> dict[str, Any]:
    """``--input`` as a JSON object; ConfigError with a one-line reason otherwise."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"--input is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from None
    if not isinstance(value, dict):
        raise ConfigError('--input must be a JSON object of input fields, e.g. \'{"q": "..."}\'')
    return value


def candidate_id(store: Store, job_id: str, candidate: str) -> str:
    """The id of ``candidate`` ('best', an id or a unique id prefix) of the job."""
    ids = chosen_candidates(store, store.get_job(job_id), candidate)
    assert ids is not None
    return ids[0]


def run(
    job: Annotated[str, typer.Argument(help="Job id, id prefix or name.")],
    input: Annotated[
        str, typer.Option("--input", "-i", help="The input fields as a JSON object: '{\"q\": 1}'.")
    ],
    candidate: Annotated[
        str, typer.Option(help="'best' (default), or a candidate id (prefix).")
    ] = "best",
    store_location: StoreOption = None,
) -> None:
    """Run the job's best candidate (a graph or any system) on one input; print its output."""
    inputs = parse_input(input)
    store = open_cli_store(store_location)
    job_id = resolve(store, job)
    chosen = candidate_id(store, job_id, candidate)
    output = run_sync(run_inference(store, job_id, inputs, candidate=chosen))
    print(printable(output) if isinstance(output, str) else json_text(output))
