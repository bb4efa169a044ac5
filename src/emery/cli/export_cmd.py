"""``emery export JOB --format openai-jsonl``: fine-tuning data from a job's rollouts."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from emery.cli.common import StoreOption, open_cli_store, resolve
from emery.cli.console import err
from emery.core.errors import ConfigError
from emery.tracing.export import export_openai_jsonl

FORMATS = ("openai-jsonl",)


def export(
    job: Annotated[str, typer.Argument(help="Job id, id prefix or name.")],
    format: Annotated[str, typer.Option("--format", help="Output format: openai-jsonl.")] = (
        "openai-jsonl"
    ),
    min_score: Annotated[
        float | None, typer.Option(help="Only rollouts scoring at least this.")
    ] = None,
    candidate: Annotated[
        str | None, typer.Option(help="'best', or a candidate id (prefix); default: all.")
    ] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write here instead of stdout.")
    ] = None,
    store_location: StoreOption = None,
) -> None:
    """Write a job's successful rollouts as OpenAI chat fine-tuning data (one JSON per line)."""
    if format not in FORMATS:
        raise ConfigError(f"--format must be one of {', '.join(FORMATS)}, not {format!r}")
    store = open_cli_store(store_location)
    lines: list[str] = []
    summary = export_openai_jsonl(
        store, resolve(store, job), lines, min_score=min_score, candidate=candidate
    )
    text = "".join(line + "\n" for line in lines)
    if output is None:
        print(text, end="")
    else:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text, encoding="utf-8")
    skipped = f", {summary.skipped_invalid} invalid skipped" if summary.skipped_invalid else ""
    where = f" to {output}" if output is not None else ""
    err.print(f"{summary.examples} examples from {summary.rollouts} rollouts{skipped}{where}")
