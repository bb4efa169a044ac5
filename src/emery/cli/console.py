"""Terminal output shared by the commands: one console for results, one for messages."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

out = Console(highlight=False)
err = Console(stderr=True, highlight=False)


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
