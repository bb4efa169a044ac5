"""Jobs on a running ``emery server`` from the command line (``--server URL``).

``emery train CONFIG --server URL``: the config validated here, the job created and run by
the server, its events followed back with the same progress display. The job's
idempotency key is the config's (with its name) unless ``--new``: running the same command
again finds the same job on the server, resumes it when it is paused and follows it, as a
local ``emery train`` does. Ctrl-C pauses the remote job. ``emery jobs
pause|resume|cancel|events --server URL`` steer and watch a job there.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from emery.cli.common import EXIT_FAILED, EXIT_INTERRUPTED
from emery.cli.console import err, out, print_json
from emery.cli.progress import RunDisplay, StreamFormat
from emery.core.events import Event
from emery.core.hashing import content_hash
from emery.reports.job_result import JobResult
from emery.reports.report import render_report
from emery.sdk.remote_job import absolute_dataset_path
from emery.sdk.server_client import ServerClient


def train_on_server(
    url: str,
    given: dict[str, Any],
    config_path: Path,
    *,
    name: str | None,
    new: bool,
    idempotency_key: str | None,
    stream: StreamFormat,
    no_poll: bool,
    as_json: bool,
) -> None:
    """Create (or find) the job on the server at ``url`` and follow it to its end."""
    config = absolute_dataset_path(given, config_path.resolve().parent)
    key = idempotency_key or (
        uuid.uuid4().hex if new else "train-" + content_hash({"config": config, "name": name})
    )
    with ServerClient(url) as client:
        job, made = client.create_job(config, name=name, idempotency_key=key)
        job_id = str(job["id"])
        if made:
            err.print(f"created job [bold]{job_id}[/bold] on {url} ({escape(str(job['name']))})")
        else:
            err.print(f"job {job_id} with this config on {url} is {job['state']}")
            if job["state"] == "paused":
                err.print(f"resuming {job_id} (start a new job instead with --new)")
                client.resume(job_id)
        run_to_end(client, job_id, stream=stream, no_poll=no_poll, as_json=as_json)


def run_to_end(
    client: ServerClient, job_id: str, *, stream: StreamFormat, no_poll: bool, as_json: bool
) -> None:
    """Print the job's id (``no_poll``), or follow it until it stops and say how it ended."""
    if no_poll:
        if as_json:
            print_json({"job_id": job_id, "state": client.job(job_id)["state"]})
        else:
            out.print(job_id)
        return
    interrupted = follow(client, job_id, stream)
    finish(client.job(job_id), client.url, as_json=as_json, interrupted=interrupted)


def follow(client: ServerClient, job_id: str, stream: StreamFormat) -> bool:
    """Show the job's events until it stops running; True when Ctrl-C paused it."""
    with RunDisplay(stream, err, job_id=job_id) as display:
        try:
            for item in client.events(job_id):
                display.feed([item])
        except KeyboardInterrupt:
            display.note(f"pausing {job_id} on the server...")
            client.pause(job_id)
            return True
    return False


def finish(job: dict[str, Any], url: str, *, as_json: bool, interrupted: bool) -> None:
    """Print how the job ended; exit non-zero unless it succeeded."""
    job_id, state = str(job["id"]), str(job["state"])
    if as_json:
        print_json({"job_id": job_id, "state": state, "result": job.get("result")})
    elif job.get("result"):
        try:
            out.print(escape(render_report(JobResult.model_validate(job["result"]))), end="")
        except ValueError:  # an SFT or RL job's result: shown as JSON
            print_json(job["result"])
    if state == "paused":
        if not as_json:
            err.print(
                f"job {job_id} paused on {url}; resume it with: emery jobs resume {job_id}"
                f" --server {url}"
            )
        raise typer.Exit(EXIT_INTERRUPTED if interrupted else 0)
    if state in ("failed", "cancelled"):
        if not as_json:
            detail = f": {job['error']}" if job.get("error") else ""
            err.print(f"[red]job {job_id} {state}[/red]{escape(detail)}", soft_wrap=True)
        raise typer.Exit(EXIT_FAILED)


def resume_on_server(
    url: str, job: str, *, stream: StreamFormat, no_poll: bool, as_json: bool
) -> None:
    """Resume the server's job ``job`` and (unless ``no_poll``) follow it to its end."""
    with ServerClient(url) as client:
        job_id = str(client.resume(job)["id"])
        run_to_end(client, job_id, stream=stream, no_poll=no_poll, as_json=as_json)


def server_events(url: str, job: str, *, since: int, follow: bool) -> Iterator[Event]:
    """The server's job's events after ``since``: those stored, or (``follow``) every one
    until the job stops running."""
    with ServerClient(url) as client:
        if follow:
            yield from client.events(job, since=since)
        else:
            yield from client.stored_events(job, since=since)
