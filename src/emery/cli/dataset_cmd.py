"""``emery dataset from-traces``: recorded chat calls in the store as a JSONL dataset."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from emery.cli.common import JsonOption, StoreOption, open_cli_store
from emery.cli.console import err, print_json
from emery.core.errors import ConfigError
from emery.core.imports import import_object
from emery.data.from_traces import TIME_FRACTIONS, TraceSelection, parse_attribute
from emery.sdk.traces import FromTracesRequest, parse_fractions, parse_time

app = typer.Typer(help="Build datasets (from recorded traces).", no_args_is_help=True)


@app.command("from-traces")
def from_traces(
    out_path: Annotated[Path, typer.Option("--out", "-o", help="The JSONL file to write.")],
    template: Annotated[
        str | None,
        typer.Option(
            "--template",
            help="A {field} template of the last user message, e.g. 'Question: {question}'.",
        ),
    ] = None,
    stage: Annotated[
        str | None,
        typer.Option("--stage", help="A prompt program's stage as the template: CONFIG[:STAGE]."),
    ] = None,
    service: Annotated[str | None, typer.Option(help="Only spans of this service.name.")] = None,
    span_name: Annotated[
        str | None, typer.Option("--span-name", help="Only spans of this name (a glob).")
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(help="Calls from this time on: ISO date/time (UTC) or 7d, 12h, 30m ago."),
    ] = None,
    until: Annotated[str | None, typer.Option(help="Calls before this time (as --since).")] = None,
    model: Annotated[str | None, typer.Option(help="Only calls to (or from) this model.")] = None,
    attribute: Annotated[
        list[str] | None,
        typer.Option("--attr", help="KEY=VALUE a span attribute must equal (repeatable)."),
    ] = None,
    redact: Annotated[
        list[str] | None,
        typer.Option(
            "--redact",
            help="A regex, or email/phone/card/ipv4, whose matches are removed (repeatable).",
        ),
    ] = None,
    redact_function: Annotated[
        str | None,
        typer.Option(
            "--redact-function", help="module:function(text) -> text, run after --redact."
        ),
    ] = None,
    split: Annotated[
        str | None,
        typer.Option("--split", help="TRAIN,VAL,TEST shares by time, newest test [0.6,0.2,0.2]."),
    ] = None,
    labeled_only: Annotated[
        bool, typer.Option("--labeled-only", help="Keep only calls with feedback.")
    ] = False,
    include_jobs: Annotated[
        bool, typer.Option("--include-jobs", help="Also read the calls of emery's own jobs.")
    ] = False,
    as_json: JsonOption = False,
    store_location: StoreOption = None,
) -> None:
    """Turn recorded chat calls into a JSONL dataset: inputs from the template, the recorded
    reply as expected, feedback as the label, split by time (newest test)."""
    if out_path.is_dir():
        raise ConfigError(f"--out {out_path} is a folder: give a file path")
    if not out_path.parent.is_dir():
        raise ConfigError(f"--out {out_path}: the folder {out_path.parent} does not exist")
    request = FromTracesRequest(
        template=template,
        stage=stage,
        selection=TraceSelection(
            service=service,
            span_name=span_name,
            since=parse_time(since, "--since") if since else None,
            until=parse_time(until, "--until") if until else None,
            model=model,
            attributes=dict(parse_attribute(a) for a in attribute or []),
            include_jobs=include_jobs,
        ),
        redact=list(redact or []),
        fractions=parse_fractions(split) if split else TIME_FRACTIONS,
        labeled_only=labeled_only,
        name=out_path.stem,
    )
    function = import_object(redact_function) if redact_function else None
    if function is not None and not callable(function):
        raise ConfigError(f"--redact-function {redact_function!r} is not callable")
    built = request.build(open_cli_store(store_location), function)
    if not built.examples:
        lines = built.summary.lines()
        raise ConfigError("no examples, nothing written: " + "; ".join([lines[0], *lines[2:]]))
    built.write(out_path)
    if as_json:
        print_json({"path": str(out_path), **built.summary.model_dump(mode="json")})
        return
    for line in built.summary.lines():
        err.print(escape(line), soft_wrap=True)
    err.print(f"wrote {escape(str(out_path))}")
