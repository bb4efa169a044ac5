"""``emery report JOB``: the text report of a job (a finished one, or one still going)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from emery.cli.common import JsonOption, StoreOption, open_cli_store, resolve
from emery.cli.console import out, print_json
from emery.core.errors import EmeryError
from emery.jobs.kinds import kind_of
from emery.reports.html_report import gather, write_html
from emery.reports.report import render_report
from emery.reports.results import JobResult, result_paths


def report(
    job: Annotated[str, typer.Argument(help="Job id, id prefix or name.")],
    html: Annotated[
        bool, typer.Option("--html", help="Write a self-contained HTML report with plots.")
    ] = False,
    output: Annotated[
        Path | None, typer.Option(help="Where to write the HTML report (with --html).")
    ] = None,
    as_json: JsonOption = False,
    store_location: StoreOption = None,
) -> None:
    """Baseline and best scores, lift, the best candidate in full, the top candidates,
    budget and LM usage. A prompt job that has not finished is reported as it stands; an
    SFT or RL job reports its tuned model and test scores once it succeeded."""
    store = open_cli_store(store_location)
    record = store.get_job(resolve(store, job))
    kind = kind_of(record)
    found = kind.result(store, record)
    if found is None:
        raise EmeryError(
            f"job {record.id} is {record.state}: a {kind.name} job reports once it succeeds"
        )
    if not isinstance(found, JobResult):
        if html:
            raise EmeryError(f"job {record.id} is a {kind.name} job: --html reports a prompt job")
        if as_json:
            print_json(found.model_dump(mode="json"))
        else:
            out.print(escape(kind.report(store, record) or ""), highlight=False, end="")
        return
    result = found
    if html:
        json_path, _ = result_paths(record, Path(record.base_dir or "."))
        target = write_html(gather(store, record, result), output or json_path.with_suffix(".html"))
        if as_json:
            print_json({"html": str(target)})
        else:
            out.print(f"HTML report written to {escape(str(target))}", soft_wrap=True)
        return
    if as_json:
        print_json(result.model_dump(mode="json"))
        return
    out.print(escape(render_report(result)), highlight=False, end="")
