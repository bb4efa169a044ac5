"""``emery report JOB``: the text report of a job (a finished one, or one still going),
from the store here or, with ``--server``, from a server's API."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from emery.cli.common import JsonOption, ServerOption, StoreOption, open_cli_store, resolve
from emery.cli.console import out, print_json
from emery.core.errors import EmeryError
from emery.jobs.kinds import JobKind, kind_named, kind_of
from emery.jobs.training_kinds import TrainingKind
from emery.reports.html_report import gather, write_html
from emery.reports.job_result import JobResult, result_paths
from emery.reports.report import render_report
from emery.sdk.server_client import ServerClient
from emery.training.job import SFTResult


def report(
    job: Annotated[str, typer.Argument(help="Job id, id prefix or name.")],
    html: Annotated[
        bool,
        typer.Option(
            "--html", help="Write a self-contained HTML report with plots (not with --server)."
        ),
    ] = False,
    output: Annotated[
        Path | None, typer.Option(help="Where to write the HTML report (with --html).")
    ] = None,
    as_json: JsonOption = False,
    server: ServerOption = None,
    store_location: StoreOption = None,
) -> None:
    """Baseline and best scores, lift, the best candidate in full, the top candidates,
    budget and LM usage. A prompt job that has not finished is reported as it stands; an
    SFT or RL job reports its tuned model and test scores once it succeeded. With --server,
    the report of a job on that server (the same text or JSON)."""
    if server is not None:
        _remote_report(server, job, html=html, as_json=as_json)
        return
    store = open_cli_store(store_location)
    record = store.get_job(resolve(store, job))
    kind = kind_of(record)
    found = kind.result(store, record)
    if found is None:
        raise EmeryError(_nothing_yet(record.id, record.state, kind))
    if not isinstance(found, JobResult):
        if html:
            raise EmeryError(f"job {record.id} is a {kind.name} job: --html reports a prompt job")
        _print(found, as_json)
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
    _print(result, as_json)


def _remote_report(url: str, job: str, *, html: bool, as_json: bool) -> None:
    """The report of a job on the server at ``url``, from its ``/api/jobs/J/result``."""
    with ServerClient(url) as client:
        answer = client.result(job)
    if html:
        page = f"{client.url}/#/jobs/{answer['job_id']}"
        raise EmeryError(
            "--html is written where the job's store is (run emery report --html there);"
            f" the server's dashboard shows the job's plots at {page}"
        )
    kind = kind_named(answer["kind"])
    if answer["result"] is None:
        raise EmeryError(_nothing_yet(answer["job_id"], answer["state"], kind))
    _print(_typed(kind, answer["result"]), as_json)


def _nothing_yet(job_id: str, state: str, kind: JobKind) -> str:
    return f"job {job_id} is {state}: a {kind.name} job reports once it succeeds"


def _typed(kind: JobKind, document: dict[str, Any]) -> JobResult | SFTResult:
    """A result document (``--json``'s) as the result object its kind reports."""
    if isinstance(kind, TrainingKind):
        return kind.result_type.model_validate(document)
    return JobResult.model_validate(document)


def _print(found: JobResult | SFTResult, as_json: bool) -> None:
    """The result as JSON or in words (a prompt job's text report, a tuned model's)."""
    if as_json:
        print_json(found.model_dump(mode="json"))
        return
    text = render_report(found) if isinstance(found, JobResult) else found.report()
    out.print(escape(text), highlight=False, end="")
