"""``emery jobs list|show|events|pause|resume|cancel|export``: look at and steer stored jobs."""

from __future__ import annotations

import time
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from emery.cli.common import (
    JsonOption,
    QuietOption,
    ServerOption,
    StoreOption,
    open_cli_store,
    resolve,
)
from emery.cli.console import err, json_text, out, print_json, print_table, printable
from emery.cli.progress import StreamFormat
from emery.cli.remote import resume_on_server, server_events
from emery.config.loading import job_config
from emery.core.errors import EmeryError
from emery.core.events import Event
from emery.jobs.manage import (
    cancel_job,
    follow_events,
    pause_job,
    run_job,
    spawn_job_process,
)
from emery.jobs.ownership import is_stale, owner_alive, queued_runs_only
from emery.reports.event_text import event_line
from emery.sdk.server_client import ServerClient
from emery.store.protocol import Store
from emery.store.records import EvaluationFilter, JobFilter, JobRecord, RolloutFilter
from emery.store.states import JOB_STATES, IllegalTransition

app = typer.Typer(help="List, inspect, pause, resume and cancel jobs.", no_args_is_help=True)


def _when(value: datetime | None) -> str:
    return "-" if value is None else value.astimezone().strftime("%Y-%m-%d %H:%M:%S")


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _state(job: JobRecord, stale: bool) -> str:
    if stale:
        return "running (run gone: resumable)"
    if job.requested_action and job.state == "running":
        return f"running ({job.requested_action} requested)"
    return job.state


@app.command("list")
def list_jobs(
    state: Annotated[
        list[str] | None, typer.Option("--state", help="Only jobs in this state (repeatable).")
    ] = None,
    algorithm: Annotated[str | None, typer.Option(help="Only this algorithm.")] = None,
    system: Annotated[str | None, typer.Option(help="Only jobs of this system.")] = None,
    sort: Annotated[
        str, typer.Option(help="created_at, updated_at, name, state, best_score; - for desc.")
    ] = "-created_at",
    limit: Annotated[int, typer.Option(min=1, help="Jobs per page.")] = 20,
    offset: Annotated[int, typer.Option(min=0, help="Skip this many jobs.")] = 0,
    as_json: JsonOption = False,
    server: ServerOption = None,
    store_location: StoreOption = None,
) -> None:
    """Jobs in the store (or on the server), newest first."""
    for name in state or []:
        if name not in JOB_STATES:
            raise EmeryError(f"--state {name!r}: choose from {', '.join(JOB_STATES)}")
    query = {"state": state or None, "algorithm": algorithm, "system": system}
    if server is not None:
        with ServerClient(server) as client:
            listed = client.list_jobs(
                {**query, "sort": sort, "limit": min(limit, 500), "offset": offset}
            )
        if as_json:
            print_json(listed)
            return
        jobs = [(record_of(view), bool(view.get("stale"))) for view in listed["jobs"]]
        total = int(listed["total"])
    else:
        store = open_cli_store(store_location)
        page = store.list_jobs(
            JobFilter(state=state or None, algorithm=algorithm, system_name=system),
            sort=sort,
            limit=limit,
            offset=offset,
        )
        if as_json:
            dumped = [job.model_dump(mode="json", exclude={"result"}) for job in page.items]
            print_json({"total": page.total, "offset": page.offset, "jobs": dumped})
            return
        jobs, total = [(job, is_stale(job)) for job in page.items], page.total
    table = Table()
    for header in ("id", "name", "algorithm", "system", "state", "baseline", "best", "created"):
        table.add_column(
            header,
            no_wrap=header in ("best", "baseline"),
            overflow="fold" if header in ("id", "name", "system") else "ellipsis",
        )
    for job, stale in jobs:
        table.add_row(
            job.id,
            escape(job.name),
            job.algorithm,
            escape(job.system_name or "-"),
            _state(job, stale),
            _pct(job.baseline_score),
            _pct(job.best_score),
            _when(job.created_at),
        )
    print_table(table)
    shown = f"{offset + 1}-{offset + len(jobs)}" if jobs else "none"
    err.print(f"{shown} of {total} jobs")


@app.command("show")
def show(
    job: Annotated[str, typer.Argument(help="Job id, id prefix or name.")],
    as_json: JsonOption = False,
    server: ServerOption = None,
    store_location: StoreOption = None,
) -> None:
    """A job's state, ownership, scores, budget and where its files are."""
    if server is not None:
        with ServerClient(server) as client:
            view = client.job(job)
        if as_json:
            print_json(view)
            return
        record, stale = record_of(view), bool(view.get("stale"))
        number, used = view["budget"].get("checkpoint"), view["budget"].get("used") or {}
    else:
        store = open_cli_store(store_location)
        record = store.get_job(resolve(store, job))
        stale, checkpoint = is_stale(record), store.get_checkpoint(record.id)
        if as_json:
            shown = checkpoint.model_dump(mode="json", exclude={"state"}) if checkpoint else None
            print_json({**record.model_dump(mode="json"), "stale": stale, "checkpoint": shown})
            return
        number = checkpoint.number if checkpoint else None
        used = checkpoint.budget if checkpoint else {}
    budget = job_config(record).job.budget
    rows: list[tuple[str, str]] = [
        ("id", record.id),
        ("name", record.name),
        ("kind", f"{record.kind} ({record.algorithm})"),
        ("system", f"{record.system_name} ({record.system_id})"),
        ("state", _state(record, stale)),
        ("stop reason", record.stop_reason or "-"),
        ("error", record.error or "-"),
        ("owner", f"{record.owner or '-'} (heartbeat {_when(record.heartbeat_at)})"),
        ("config", record.config_path or "(from Python)"),
        ("created", _when(record.created_at)),
        ("started", _when(record.started_at)),
        ("finished", _when(record.finished_at)),
        ("baseline val", _pct(record.baseline_score)),
        ("best val", f"{_pct(record.best_score)} ({record.best_candidate_id or '-'})"),
        ("checkpoint", f"iteration {number}" if number is not None else "none yet"),
        (
            "metric calls",
            f"{used.get('metric_calls', 0)} of {budget.metric_calls or 'no limit'}",
        ),
        ("events", str(record.last_seq)),
    ]
    if record.result and record.result.get("files"):
        rows += [(kind, path) for kind, path in record.result["files"].items()]
    width = max(len(label) for label, _ in rows)
    for label, value in rows:
        out.print(f"[bold]{label.ljust(width)}[/bold]  {escape(str(value))}", soft_wrap=True)


@app.command("events")
def events(
    job: Annotated[str, typer.Argument(help="Job id, id prefix or name.")],
    since: Annotated[int, typer.Option(min=0, help="Only events after this sequence number.")] = 0,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing until the job stops running.")
    ] = False,
    kind: Annotated[list[str] | None, typer.Option(help="Only this kind (repeatable).")] = None,
    timeout: Annotated[
        float | None, typer.Option(min=0, help="Stop following after this many seconds.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
    server: ServerOption = None,
    store_location: StoreOption = None,
) -> None:
    """A job's events in order; `--follow` tails them while the job runs."""
    if server is not None:
        items: Iterable[Event] = server_events(server, job, since=since, follow=follow)
    else:
        store = open_cli_store(store_location)
        items = follow_events(
            store, resolve(store, job), since=since, follow=follow, timeout_s=timeout
        )
    for item in items:
        if kind and item.kind not in kind:
            continue
        if as_json:
            print(json_text(item.model_dump(mode="json")), flush=True)
        else:
            out.print(escape(event_line(item)), highlight=False, soft_wrap=True)


@app.command("pause")
def pause(
    job: Annotated[str, typer.Argument(help="Job id, id prefix or name.")],
    wait: Annotated[
        bool, typer.Option("--wait/--no-wait", help="Wait until the engine has paused.")
    ] = True,
    timeout: Annotated[float, typer.Option(min=0, help="Longest wait in seconds.")] = 60.0,
    server: ServerOption = None,
    store_location: StoreOption = None,
) -> None:
    """Pause a job; it keeps everything stored and `emery jobs resume` continues it."""
    if server is not None:
        with ServerClient(server) as client:
            state = client.pause(job, wait_s=min(timeout, 60.0) if wait else 0.0)["state"]
        paused = state == "paused"
        out.print(f"job {job} paused" if paused else f"job {job}: pause requested ({state})")
        return
    store = open_cli_store(store_location)
    job_id = resolve(store, job)
    started = time.perf_counter()
    record = pause_job(store, job_id, wait_s=timeout if wait else 0.0)
    elapsed = time.perf_counter() - started
    if record.state == "paused":
        out.print(f"job {job_id} paused after {elapsed:.2f}s")
    else:
        out.print(f"job {job_id}: pause requested (still {record.state})")


@app.command("cancel")
def cancel(
    job: Annotated[str, typer.Argument(help="Job id, id prefix or name.")],
    wait: Annotated[
        bool, typer.Option("--wait/--no-wait", help="Wait until the engine has stopped.")
    ] = True,
    timeout: Annotated[float, typer.Option(min=0, help="Longest wait in seconds.")] = 60.0,
    server: ServerOption = None,
    store_location: StoreOption = None,
) -> None:
    """Cancel a job for good; what it stored (candidates, evaluations, events) stays."""
    if server is not None:
        with ServerClient(server) as client:
            state = client.cancel(job, wait_s=min(timeout, 60.0) if wait else 0.0)["state"]
        done = state == "cancelled"
        out.print(f"job {job} cancelled" if done else f"job {job}: cancel requested ({state})")
        return
    store = open_cli_store(store_location)
    job_id = resolve(store, job)
    record = cancel_job(store, job_id, wait_s=timeout if wait else 0.0)
    if record.state == "cancelled":
        out.print(f"job {job_id} cancelled")
    else:
        out.print(f"job {job_id}: cancel requested (still {record.state})")


@app.command("resume")
def resume(
    job: Annotated[str, typer.Argument(help="Job id, id prefix or name.")],
    stream_format: Annotated[
        str, typer.Option("--stream-format", help="cli (event lines), chart (live) or none.")
    ] = "cli",
    no_poll: Annotated[
        bool, typer.Option("--no-poll", help="Resume in the background; print the job id.")
    ] = False,
    poll_timeout: Annotated[
        float | None,
        typer.Option(min=0, help="Watch at most this long, then continue in the background."),
    ] = None,
    as_json: JsonOption = False,
    quiet: QuietOption = False,
    server: ServerOption = None,
    store_location: StoreOption = None,
) -> None:
    """Continue a paused job (or one whose run crashed) from its last checkpoint; with
    --server, the server's job, followed from here."""
    if stream_format not in ("cli", "chart", "none"):
        raise EmeryError(f"--stream-format must be cli, chart or none, not {stream_format!r}")
    stream: StreamFormat = "none" if quiet else stream_format  # type: ignore[assignment]
    if server is not None:
        resume_on_server(server, job, stream=stream, no_poll=no_poll, as_json=as_json)
        return
    store = open_cli_store(store_location)
    job_id = resolve(store, job)
    record = store.get_job(job_id)
    if record.state == "running" and owner_alive(record):
        if record.requested_action == "pause" and store.set_requested_action(
            job_id, None, only_state="running"
        ):
            out.print(f"job {job_id}: pause request withdrawn; it keeps running")
            return
        raise IllegalTransition(f"job {job_id} is already running ({record.owner})")
    if record.terminal:
        raise IllegalTransition(f"job {job_id} has already {record.state}: nothing to resume")
    if no_poll:
        pid = spawn_job_process(store, job_id)  # None: the process starting it runs it
        if as_json:
            print_json({"job_id": job_id, "pid": pid})
        else:
            out.print(job_id)
            where = f"pid {pid}" if pid is not None else f"in {store.get_job(job_id).owner}"
            err.print(f"resumed in the background ({where})")
        return
    from emery.cli.foreground import run_foreground  # the runtime: imported only to run
    from emery.cli.train_cmd import finish

    outcome = run_foreground(store, job_id, stream=stream, poll_timeout_s=poll_timeout)
    finish(store, outcome, as_json=as_json)


@app.command("run", hidden=True)
def run(
    job: Annotated[str, typer.Argument(help="Job id.")],
    store_location: StoreOption = None,
) -> None:
    """Run a job in this process without a display (the background job process)."""
    store = open_cli_store(store_location)
    job_id = resolve(store, job)

    def log(items: Any) -> None:
        for item in items:
            print(printable(event_line(item)), flush=True)

    with queued_runs_only():  # a pause that came first overrules the resume that started it
        record = run_job(store, job_id, on_event=log)
    if record.state in ("failed", "cancelled"):
        raise typer.Exit(1)


@app.command("export")
def export(
    job: Annotated[str, typer.Argument(help="Job id, id prefix or name.")],
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write here instead of stdout.")
    ] = None,
    store_location: StoreOption = None,
) -> None:
    """Everything stored about a job as one JSON document: the job, its events, checkpoint,
    candidates with scores, evaluations and rollouts."""
    store = open_cli_store(store_location)
    document = export_job(store, resolve(store, job))
    text = json_text(document, indent=2)
    if output is None:
        print(text)
        return
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text, encoding="utf-8")
    err.print(f"exported job to {output}")


def record_of(view: dict[str, Any]) -> JobRecord:
    """A job as a server lists it (its config left out of lists) as a ``JobRecord``."""
    return JobRecord.model_validate({"config": {}, **view})


def export_job(store: Store, job_id: str) -> dict[str, Any]:
    """The export document of one job."""
    record = store.get_job(job_id)
    checkpoint = store.get_checkpoint(job_id)
    return {
        "format": "emery.job-export/1",
        "job": record.model_dump(mode="json"),
        "events": [item.model_dump(mode="json") for item in store.list_events(job_id)],
        "checkpoint": checkpoint.model_dump(mode="json") if checkpoint else None,
        "candidates": [
            {**c.candidate.model_dump(mode="json"), "val_score": c.score, "val_n": c.n}
            for c in store.list_candidates(job_id, sort="ordinal").items
        ],
        "evaluations": [
            {**e.result.model_dump(mode="json"), "rollout_id": e.rollout_id, "scope": e.scope}
            for e in store.list_evaluations(EvaluationFilter(job_id=job_id), limit=None).items
        ],
        "rollouts": [
            r.model_dump(mode="json")
            for r in store.list_rollouts(RolloutFilter(job_id=job_id), limit=None).items
        ],
    }
