"""Terminal output shared by the commands: one console for results, one for messages."""

from __future__ import annotations

import json
import re
import sys
from typing import Any

from rich.console import Console
from rich.measure import Measurement
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

_C1 = re.compile("[\x7f-\x9f]")
# C0 controls but tab and newline, DEL, and C1 controls (U+0080-U+009F: CSI is U+009B).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` with its control characters shown as ``\\xNN``: a job name or a model's
    reply cannot move the cursor, recolour the terminal or set its title."""
    return _CONTROL.sub(lambda match: f"\\x{ord(match.group()):02x}", text)


class SafeConsole(Console):
    """A console whose printed strings show control characters as ``\\xNN`` (``printable``);
    markup and the console's own styles still work."""

    def render_str(self, text: str, **options: Any) -> Text:
        return super().render_str(printable(text), **options)


out = SafeConsole(highlight=False)
err = SafeConsole(stderr=True, highlight=False)

_UNLIMITED = 1_000_000


def print_table(table: Table) -> None:
    """Print ``table`` on stdout without cutting a value: at its natural width when stdout
    is not a terminal (a pipe, a file), so scripts read whole ids, names and paths; in a
    terminal, at the terminal's width (give such columns ``overflow="fold"``)."""
    if _stdout_is_tty():
        out.print(table)
        return
    natural = Measurement.get(out, out.options.update_width(_UNLIMITED), table).maximum
    wide = SafeConsole(
        file=out.file,
        width=max(natural, out.width),
        highlight=False,
        force_terminal=out.is_terminal,  # FORCE_COLOR keeps its colours in a pipe
        color_system="auto" if out.color_system else None,
    )
    wide.print(table)


def interactive() -> bool:
    """Whether a person can answer a question on this terminal."""
    return sys.stdin.isatty() and sys.stderr.isatty()


def _stdout_is_tty() -> bool:
    isatty = getattr(out.file, "isatty", None)
    try:
        return bool(isatty is not None and isatty())
    except ValueError:  # a closed file
        return False


def print_json(value: Any) -> None:
    """Machine output: JSON on stdout, nothing else."""
    print(json_text(value, indent=2))


def json_text(value: Any, *, indent: int | None = None) -> str:
    """``value`` as JSON for a terminal: non-ASCII text as is, but C1 controls escaped
    (``json.dumps`` escapes C0 ones; a raw U+009B starts a terminal escape sequence)."""
    text = json.dumps(value, indent=indent, ensure_ascii=False, default=str)
    return _C1.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


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
