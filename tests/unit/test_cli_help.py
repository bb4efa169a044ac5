"""Every command's help reads well: no RST markup, and no line that ends mid-sentence
(a docstring's own line breaks, which typer would print as they are)."""

from __future__ import annotations

import re
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from emery.cli.app import COMMANDS, app
from emery.cli.help_text import unwrap

WIDE = {"COLUMNS": "2000"}  # the terminal never wraps: only the text's own breaks show
SENTENCE_END = re.compile(r"[.:?!)]$")


def commands() -> dict[str, Any]:
    """Every command and subcommand by its words after ``emery``."""
    root = typer.main.get_command(app)
    found: dict[str, Any] = {"": root}
    for name in COMMANDS:
        command = root.get_command(typer.Context(root), name)  # type: ignore[attr-defined]
        found[name] = command
        for sub_name, sub in getattr(command, "commands", {}).items():
            found[f"{name} {sub_name}"] = sub
    return found


def verbatim(help_text: str | None) -> set[str]:
    """The lines of the paragraphs marked to be kept as written (click's \\b)."""
    paragraphs = (help_text or "").split("\n\n")
    return {line.strip() for p in paragraphs if p.startswith("\b") for line in p.splitlines()}


def help_of(path: list[str]) -> str:
    result = CliRunner().invoke(app, [*path, "--help"], env=WIDE)
    assert result.exit_code == 0, result.output
    return result.output


def panel_rows(text: str, title: str) -> list[str]:
    """The lines inside the box titled ``title``, without the box."""
    rows, inside = [], False
    for line in text.splitlines():
        if line.startswith("╭"):
            inside = title in line
        elif line.startswith("╰"):
            inside = False
        elif inside:
            rows.append(line.strip()[1:-1].rstrip())
    return rows


def description(text: str) -> list[str]:
    """The lines of the help text between the usage line and the first box."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if "Usage:" in line) + 1
    end = next(i for i, line in enumerate(lines) if line.startswith("╭"))
    return [line.strip() for line in lines[start:end] if line.strip()]


@pytest.mark.parametrize("words", list(commands()), ids=lambda words: words or "emery")
def test_help_reads_well(words: str) -> None:
    text = help_of(words.split())
    assert "``" not in text
    kept = verbatim(commands()[words].help)
    for line in description(text):
        if line not in kept:
            assert SENTENCE_END.search(line), f"ends mid-sentence: {line!r}"
    for row in panel_rows(text, "Commands"):
        assert not row.startswith("  "), f"a summary spans lines: {row!r}"
        assert SENTENCE_END.search(row), f"a summary ends mid-sentence: {row!r}"


def test_every_command_is_listed_with_a_one_line_summary() -> None:
    rows = panel_rows(help_of([]), "Commands")
    assert [row.split()[0] for row in rows] == list(COMMANDS)


def test_unwrap_joins_lines_but_keeps_marked_paragraphs() -> None:
    text = "First line\ncontinues.\n\n\b\n/a   one\n/b   two\n\nLast\n  part."
    assert unwrap(text) == "First line continues.\n\n\b\n/a   one\n/b   two\n\nLast part."


def test_an_old_command_name_still_works_hidden_from_the_help() -> None:
    from emery.cli.app import HIDDEN_ALIASES

    listed = [row.split()[0] for row in panel_rows(help_of([]), "Commands")]
    for old, new in HIDDEN_ALIASES.items():
        assert old not in listed
        assert new in listed
        result = CliRunner().invoke(app, [old, "--help"], env=WIDE)
        assert result.exit_code == 0, result.output
        assert f"emery {new}" in result.output
