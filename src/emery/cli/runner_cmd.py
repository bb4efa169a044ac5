"""``emery runner``: run queued rollouts of ``executor = "runners"`` jobs from a store;
``emery workers``: the runners a store has seen."""

from __future__ import annotations

import asyncio
import signal
import time
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from emery.cli.common import JsonOption, StoreOption, open_cli_store, resolve
from emery.cli.console import err, out, print_json, print_table
from emery.core.errors import ConfigError
from emery.store.backends import store_file
from emery.store.protocol import RolloutQueue
from emery.workers.http_queue import HttpQueue
from emery.workers.runner import RolloutWorker


def refuse_missing_store(location: str | None) -> None:
    """A runner joins the store of existing jobs: a SQLite file that is not there is a
    mistyped path, not a store to create."""
    path = store_file(location or None)
    if path is not None and not path.is_file():
        raise ConfigError(
            f"no store at {path}: a runner joins the store of existing jobs"
            " (give the --store their job was created in)"
        )


RunnerServerOption = Annotated[
    str | None,
    typer.Option(
        "--server",
        envvar="EMERY_SERVER",
        help="Claim rollouts from this emery server (http://host:8420) instead of a store;"
        " its runner key from $EMERY_RUNNER_KEY (else $EMERY_API_KEY).",
        show_default=False,
    ),
]


def runner(
    store_location: StoreOption = None,
    server: RunnerServerOption = None,
    job: Annotated[
        str | None, typer.Option(help="Run only this job's rollouts (id, prefix or name).")
    ] = None,
    concurrency: Annotated[int, typer.Option(min=1, help="Rollouts this runner runs at once.")] = 1,
    poll_s: Annotated[
        float, typer.Option(min=0.01, help="Seconds between looks at an empty queue.")
    ] = 0.2,
    idle_exit_s: Annotated[
        float | None,
        typer.Option(min=0.0, help="Exit after this many seconds with nothing to run."),
    ] = None,
    max_rollouts: Annotated[
        int | None, typer.Option(min=1, help="Exit after running this many rollouts.")
    ] = None,
) -> None:
    """Claim and run queued rollouts of jobs whose runtime.executor is "runners".

    Start any number, on this machine (SQLite file store), on others
    (PostgreSQL store), or anywhere a running `emery server` is reachable
    (--server: no database address or credentials, only a runner key). Each
    claims a rollout with a lease, runs its next attempt with the job's system,
    task model and verifier (rebuilt from the job's config; its files and
    modules must be reachable here, at the job's folder), stores its spans and
    writes the result. A runner that dies loses its lease after the job's
    lease_s; the rollout goes back in the queue. Ctrl-C or SIGTERM finishes the
    rollouts in hand, then exits.
    """
    queue, where, job_id = _queue(store_location, server, job)
    worker = RolloutWorker(
        queue,
        job_id=job_id,
        concurrency=concurrency,
        poll_s=poll_s,
        idle_exit_s=idle_exit_s,
        max_rollouts=max_rollouts,
    )
    for number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(number, lambda *_: worker.stop())
    err.print(f"emery runner {worker.worker_id} on {where}")
    try:
        ran = asyncio.run(worker.run())
    except KeyboardInterrupt:
        worker.stop()
        ran = worker.ran
    err.print(f"runner {worker.worker_id} stopped after {ran} rollouts ({worker.kept} kept)")


def _queue(
    store_location: str | None, server: str | None, job: str | None
) -> tuple[RolloutQueue, str, str | None]:
    """The queue a runner claims from (a store here, or a server's over HTTP), where it
    is in words, and the job it is limited to (a server's job by its full id)."""
    if server is not None:
        if store_location is not None:
            raise ConfigError("give --store or --server, not both: a runner claims from one queue")
        return HttpQueue(server), server, job
    refuse_missing_store(store_location)
    store = open_cli_store(store_location)
    if store.url.startswith("memory"):
        raise ConfigError("a runner needs the job's store (a SQLite file or PostgreSQL URL)")
    job_id = resolve(store, job) if job is not None else None
    return store, store.url.split("@")[-1], job_id


def workers(as_json: JsonOption = False, store_location: StoreOption = None) -> None:
    """The runners this store has seen, oldest first: status, host, concurrency, last
    heartbeat, rollouts done and failed, the job of the rollouts they hold."""
    store = open_cli_store(store_location)
    records = store.list_workers()
    if as_json:
        print_json({"workers": [w.model_dump(mode="json") for w in records]})
        return
    if not records:
        out.print("no runners have joined this store (emery runner --store ... starts one)")
        return
    table = Table()
    for header in ("id", "status", "concurrency", "heartbeat", "done", "failed", "job"):
        table.add_column(header, overflow="fold" if header == "id" else "ellipsis")
    for worker in records:
        beat = worker.heartbeat_at.timestamp() if worker.heartbeat_at else None
        table.add_row(
            escape(worker.id),
            worker.status,
            str(worker.metadata.get("concurrency", "-")),
            f"{time.time() - beat:.0f} s ago" if beat is not None else "-",
            str(worker.rollouts_done),
            str(worker.rollouts_failed),
            worker.job_id or "-",
        )
    print_table(table)
