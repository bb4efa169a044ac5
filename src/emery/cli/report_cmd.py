"""``emery report JOB``: the text report of a job (a finished one, or one still going)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from emery.cli.common import JsonOption, StoreOption, open_cli_store, resolve
from emery.cli.console import out, print_json
from emery.jobs.html_report import gather, write_html
from emery.jobs.report import render_report
from emery.jobs.results import JobResult, build_result, result_paths


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
    budget and LM usage. A job that has not finished is reported as it stands."""
    store = open_cli_store(store_location)
    record = store.get_job(resolve(store, job))
    result = (
        JobResult.model_validate(record.result)
        if record.state == "succeeded" and record.result
        else build_result(store, record)
    )
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
