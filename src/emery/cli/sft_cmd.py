"""``emery train`` for ``[job] type = "sft"`` or ``"rl"``: find or create the training job
and run it here; ``emery jobs resume`` of an SFT or RL job runs here too."""

from __future__ import annotations

import signal
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Any

import typer
from rich.markup import escape

from emery.cli.common import EXIT_FAILED, EXIT_INTERRUPTED
from emery.cli.console import err, out, print_json
from emery.config.schema import JobConfig
from emery.core.events import Event
from emery.core.hashing import content_hash
from emery.jobs.event_text import event_line
from emery.jobs.manage import create_job, find_resumable
from emery.store.protocol import Store
from emery.store.records import JobRecord
from emery.training.job import SFTResult, run_sft_job
from emery.training.rl_job import RLResult, run_rl_job


def sft_job(
    store: Store,
    config: JobConfig,
    *,
    given: dict[str, Any],
    path: Path,
    name: str | None,
    new: bool,
) -> JobRecord:
    """The SFT or RL job of ``config``: the unfinished one made from the same file, or a new
    one."""
    job = None if new else find_resumable(store, content_hash(config.model_dump(mode="json")))
    if job is not None and job.config_path == str(path.resolve()):
        err.print(f"resuming {job.id} (start a new job instead with --new)")
        return job
    job = create_job(store, config, given=given, config_path=path, name=name)
    err.print(f"created job [bold]{job.id}[/bold] ({escape(job.name)}, {job.kind})")
    return job


def run_sft_foreground(store: Store, job_id: str, *, as_json: bool, quiet: bool = False) -> None:
    """Run or resume SFT or RL job ``job_id`` in this process, printing its events on
    stderr (unless ``quiet``); Ctrl-C pauses it; exits non-zero unless it succeeds."""

    def show(events: Sequence[Event]) -> None:
        if not quiet:
            for item in events:
                err.print(escape(event_line(item)), highlight=False, soft_wrap=True)

    def pause(signum: int, frame: FrameType | None) -> None:
        err.print("pausing after this step...")
        store.set_requested_action(job_id, "pause")

    previous = signal.signal(signal.SIGINT, pause)
    try:
        rl = store.get_job(job_id).kind == "rl"
        job = (run_rl_job if rl else run_sft_job)(store, job_id, on_event=show)
    finally:
        signal.signal(signal.SIGINT, previous)
    if as_json:
        print_json({"job_id": job.id, "state": job.state, "error": job.error, "result": job.result})
    elif job.state == "succeeded" and job.result:
        result = (RLResult if rl else SFTResult).model_validate(job.result)
        out.print(escape(result.report()), highlight=False, end="")
    if job.state == "paused":
        err.print(f"job {job.id} paused; `emery jobs resume {job.id}` continues it")
        raise typer.Exit(EXIT_INTERRUPTED)
    if job.state in ("failed", "cancelled"):
        detail = f": {job.error}" if job.error else ""
        err.print(f"[red]job {job.id} {job.state}[/red]{escape(detail)}", soft_wrap=True)
        raise typer.Exit(EXIT_FAILED)
