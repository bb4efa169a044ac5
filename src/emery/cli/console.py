"""Terminal output shared by the commands: one console for results, one for messages."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.measure import Measurement
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

out = Console(highlight=False)
err = Console(stderr=True, highlight=False)

_UNLIMITED = 1_000_000


def print_table(table: Table) -> None:
    """Print ``table`` on stdout without cutting a value: at its natural width when stdout
    is not a terminal (a pipe, a file), so scripts read whole ids, names and paths; in a
    terminal, at the terminal's width (give such columns ``overflow="fold"``)."""
    if _stdout_is_tty():
        out.print(table)
        return
    natural = Measurement.get(out, out.options.update_width(_UNLIMITED), table).maximum
    wide = Console(
        file=out.file,
        width=max(natural, out.width),
        highlight=False,
        force_terminal=out.is_terminal,  # FORCE_COLOR keeps its colours in a pipe
        color_system="auto" if out.color_system else None,
    )
    wide.print(table)


def _stdout_is_tty() -> bool:
    isatty = getattr(out.file, "isatty", None)
    try:
        return bool(isatty is not None and isatty())
    except ValueError:  # a closed file
        return False


def print_json(value: Any) -> None:
    """Machine output: JSON on stdout, nothing else."""
    print(json.dumps(value, indent=2, ensure_ascii=False, default=str))


def progress_bar(*, disable: bool = False) -> Progress:
    """A progress bar on stderr, so stdout stays clean for results."""
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
        console=err,
        disable=disable,
        transient=False,
    )
