"""Options and helpers the job commands share: the store, job ids, exit codes."""

from __future__ import annotations

from typing import Annotated

import typer

from emery.store.backends import open_store
from emery.store.protocol import Store

StoreOption = Annotated[
    str | None,
    typer.Option(
        "--store",
        help="Store location: a file path, sqlite:///PATH, postgresql://... or memory://"
        " (default: $EMERY_STORE or ./.emery/emery.db).",
        show_default=False,
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON for machines.")]
ServerOption = Annotated[
    str | None,
    typer.Option(
        "--server",
        envvar="EMERY_SERVER",
        help="The job is on this emery server (http://host:8420) instead of a store here;"
        " its API key from $EMERY_API_KEY.",
        show_default=False,
    ),
]
QuietOption = Annotated[
    bool,
    typer.Option(
        "--quiet", "-q", help="No progress lines on stderr (with --json too, they go there)."
    ),
]

EXIT_FAILED = 1
EXIT_INTERRUPTED = 130


def open_cli_store(location: str | None) -> Store:
    """The store a command works on."""
    return open_store(location)


def resolve(store: Store, job: str) -> str:
    """A full job id from an id, a unique id prefix or a job name."""
    return store.resolve_job_id(job)
