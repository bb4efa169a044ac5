"""``emery report JOB``: the text report of a job (a finished one, or one still going)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from emery.cli.common import JsonOption, StoreOption, open_cli_store, resolve
from emery.cli.console import out, print_json
from emery.jobs.report import render_report
from emery.jobs.results import JobResult, build_result


def report(
    job: Annotated[str, typer.Argument(help="Job id, id prefix or name.")],
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
    if as_json:
        print_json(result.model_dump(mode="json"))
        return
    out.print(escape(render_report(result)), highlight=False, end="")
