"""``emery export JOB --format openai-jsonl|graph|txt``: fine-tuning data from a job's
rollouts, or the graph its best (or a chosen) candidate runs: as a ``[system]`` spec that
``kind = "graph"`` loads again (``graph``), or as readable text (``txt``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from emery.cli.common import StoreOption, open_cli_store, resolve
from emery.cli.console import err
from emery.cli.run_cmd import candidate_id
from emery.core.errors import ConfigError
from emery.reports.graph_results import job_graph
from emery.systems.graph.export import graph_json
from emery.systems.graph.render import graph_text
from emery.tracing.export import export_openai_jsonl

FORMATS = ("openai-jsonl", "graph", "txt")


def export(
    job: Annotated[str, typer.Argument(help="Job id, id prefix or name.")],
    format: Annotated[
        str, typer.Option("--format", help="Output format: openai-jsonl, graph or txt.")
    ] = "openai-jsonl",
    min_score: Annotated[
        float | None, typer.Option(help="Only rollouts scoring at least this.")
    ] = None,
    candidate: Annotated[
        str | None,
        typer.Option(help="'best', or a candidate id (prefix); default: all (graph, txt: best)."),
    ] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write here instead of stdout.")
    ] = None,
    store_location: StoreOption = None,
) -> None:
    """Write a job's successful rollouts as OpenAI chat fine-tuning data, or its best graph.

    The fine-tuning data is one JSON object per line; --format graph (or txt) writes the graph
    of the job's best candidate instead.
    """
    if format not in FORMATS:
        raise ConfigError(f"--format must be one of {', '.join(FORMATS)}, not {format!r}")
    store = open_cli_store(store_location)
    job_id = resolve(store, job)
    if format != "openai-jsonl":
        chosen = candidate_id(store, job_id, candidate or "best")
        graph = job_graph(store, job_id, candidate=chosen)
        _write(graph_json(graph) + "\n" if format == "graph" else graph_text(graph), output)
        where = f" to {output}" if output is not None else ""
        err.print(f"graph {graph.name} of candidate {chosen[:12]}{where}")
        return
    lines: list[str] = []
    summary = export_openai_jsonl(store, job_id, lines, min_score=min_score, candidate=candidate)
    _write("".join(line + "\n" for line in lines), output)
    skipped = f", {summary.skipped_invalid} invalid skipped" if summary.skipped_invalid else ""
    where = f" to {output}" if output is not None else ""
    err.print(f"{summary.examples} examples from {summary.rollouts} rollouts{skipped}{where}")


def _write(text: str, output: Path | None) -> None:
    """``text`` to ``output``, or to stdout."""
    if output is None:
        print(text, end="")
        return
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text, encoding="utf-8")
