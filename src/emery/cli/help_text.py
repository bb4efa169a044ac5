"""Command help as typer shows it well: a docstring's paragraphs wrapped in the source are
joined into one line each, so the terminal wraps them instead of breaking mid-sentence.

A paragraph that starts with click's ``\\b`` marker (a table, a list) is kept as written."""

from __future__ import annotations

import inspect
from typing import Any

NO_REWRAP = "\b"


def unwrap(text: str) -> str:
    """``text`` with the single line breaks inside each paragraph turned into spaces."""
    paragraphs = text.strip().split("\n\n")
    return "\n\n".join(
        paragraph
        if paragraph.lstrip(" ").startswith(NO_REWRAP)
        else " ".join(line.strip() for line in paragraph.splitlines())
        for paragraph in paragraphs
    )


def unwrap_help(command: Any) -> None:
    """Unwrap the help of ``command`` (a click command) and of its subcommands."""
    if command.help:
        command.help = unwrap(inspect.cleandoc(command.help))
    for sub in getattr(command, "commands", {}).values():
        unwrap_help(sub)
