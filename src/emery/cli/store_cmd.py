"""``emery store prune``: the bulky trace data of old finished jobs deleted, and the
space given back (``Store.prune``, ``emery.store.sql.retention``)."""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime
from typing import Annotated

import typer

from emery.cli.common import JsonOption, StoreOption, open_cli_store
from emery.cli.console import out, print_json
from emery.core.errors import ConfigError, StoreError
from emery.store.backends import store_file
from emery.store.records import PruneCounts

app = typer.Typer(help="Look after the store: prune old trace data.", no_args_is_help=True)

DAY_S = 86_400


@app.command("prune")
def prune(
    older_than: Annotated[
        float,
        typer.Option(
            "--older-than",
            metavar="DAYS",
            help="Prune finished jobs last updated more than DAYS days ago.",
            show_default=False,
        ),
    ],
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print what would be deleted; delete nothing.")
    ] = False,
    app_traces: Annotated[
        bool,
        typer.Option(
            "--app-traces",
            help="Also delete application traces (spans of no job, which `emery dataset"
            " from-traces` builds datasets from) whose newest span is older than DAYS.",
        ),
    ] = False,
    no_vacuum: Annotated[
        bool,
        typer.Option(
            "--no-vacuum",
            help="Skip SQLite's VACUUM (it holds the store's write lock while it rewrites"
            " the file): the freed pages are reused, the file does not shrink.",
        ),
    ] = False,
    as_json: JsonOption = False,
    store_location: StoreOption = None,
) -> None:
    """Delete the spans, rollouts and attempts of finished jobs older than DAYS, then
    give the space back (SQLite: VACUUM). Jobs, candidates, evaluations, events and
    checkpoints stay; unfinished jobs and published prompts' jobs are not touched."""
    if not math.isfinite(older_than) or older_than < 0:
        raise ConfigError(f"--older-than is a number of days, 0 or more, not {older_than:g}")
    path = store_file(store_location)
    if path is not None and not path.is_file():  # do not create an empty store to prune
        raise StoreError(f"no store at {path}")
    before = datetime.fromtimestamp(max(0.0, time.time() - older_than * DAY_S), tz=UTC)
    store = open_cli_store(store_location)
    try:
        counts = store.prune(before, app_traces=app_traces, dry_run=dry_run, vacuum=not no_vacuum)
    finally:
        store.close()
    if as_json:
        print_json({**counts.model_dump(mode="json"), "bytes_freed": counts.bytes_freed})
        return
    out.print(summary(counts, app_traces), soft_wrap=True)


def summary(counts: PruneCounts, app_traces: bool) -> str:
    """What a prune deleted (or would delete), in a few lines."""
    verb = "would delete" if counts.dry_run else "deleted"
    lines = [
        f"{verb} the traces of {counts.jobs} finished job(s) last updated before"
        f" {counts.before:%Y-%m-%d %H:%M} UTC: {counts.spans} spans, {counts.rollouts}"
        f" rollouts, {counts.attempts} attempts"
    ]
    if app_traces:
        lines.append(f"{verb} {counts.app_spans} application spans")
    if counts.kept_jobs:
        lines.append(
            f"kept {counts.kept_jobs} old job(s) whole: a published prompt's job or one"
            " awaiting an approval"
        )
    if counts.bytes_before is not None and counts.bytes_after is not None:
        freed = counts.bytes_freed or 0
        lines.append(
            f"the store's file went from {_size(counts.bytes_before)} to"
            f" {_size(counts.bytes_after)} ({_size(freed)} freed)"
        )
    elif counts.bytes_before is not None:
        lines.append(f"the store's file holds {_size(counts.bytes_before)}")
    return "\n".join(lines)


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"
