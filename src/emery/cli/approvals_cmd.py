"""``emery approvals list|show|approve|reject|edit``: a person's decisions on the requests
of jobs with ``[job] approve = "best"`` and of ``emery publish --request``."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from emery.cli.common import JsonOption, StoreOption, open_cli_store
from emery.cli.console import err, out, print_json, print_table
from emery.core.approvals import Approval
from emery.core.errors import ConfigError
from emery.evaluation.stats import ScoreSummary
from emery.reports import approvals
from emery.reports.approvals import ApprovalReview

IdArgument = Annotated[str, typer.Argument(help="The request's id (or a unique prefix).")]
ReasonOption = Annotated[
    str | None, typer.Option("--reason", help="Why (the search's reflection reads it).")
]

app = typer.Typer(
    help="Approve, reject or edit the candidates jobs wait on, and publish requests.",
    no_args_is_help=True,
)


@app.command("list")
def list_requests(
    job: Annotated[str, typer.Argument(help="Job id, id prefix or name.")],
    pending: Annotated[bool, typer.Option("--pending", help="Only undecided requests.")] = False,
    as_json: JsonOption = False,
    store_location: StoreOption = None,
) -> None:
    """A job's approval requests, oldest first."""
    found = approvals.job_approvals(open_cli_store(store_location), job)
    if pending:
        found = [a for a in found if a.status == "pending"]
    if as_json:
        print_json({"approvals": [a.model_dump(mode="json") for a in found]})
        return
    if not found:
        out.print("no approval requests")
        return
    table = Table()
    for header in ("id", "kind", "status", "candidate", "val", "replaces", "val ", "result"):
        table.add_column(header.strip())
    for a in found:
        table.add_row(
            a.id,
            a.kind if a.target is None else f"{a.kind} {escape(a.target)}",
            a.status + ("" if a.applied or a.status == "pending" else " (not applied yet)"),
            a.candidate_id[:12],
            _score(a.score),
            (a.current_id or "-")[:12],
            _score(a.current_score),
            escape(a.result or a.reason or ""),
        )
    print_table(table)


@app.command("show")
def show(id: IdArgument, as_json: JsonOption = False, store_location: StoreOption = None) -> None:
    """A request: the candidate beside what it would replace, their diff, val scores with
    intervals and a few outputs side by side."""
    found = approvals.review(open_cli_store(store_location), id)
    if as_json:
        print_json(found.model_dump(mode="json"))
        return
    _print_review(found)


@app.command("approve")
def approve(
    id: IdArgument, as_json: JsonOption = False, store_location: StoreOption = None
) -> None:
    """Approve: the candidate becomes the job's best (or the prompt is published)."""
    _report(approvals.decide(open_cli_store(store_location), id, "approve"), as_json)


@app.command("reject")
def reject(
    id: IdArgument,
    reason: ReasonOption = None,
    as_json: JsonOption = False,
    store_location: StoreOption = None,
) -> None:
    """Reject: the best stays; the reason is shown to the search's reflection."""
    _report(approvals.decide(open_cli_store(store_location), id, "reject", reason=reason), as_json)


@app.command("edit")
def edit(
    id: IdArgument,
    text: Annotated[str | None, typer.Option("--text", help="The new text.")] = None,
    file: Annotated[
        Path | None, typer.Option("--file", help="Read the new text from this file.")
    ] = None,
    component: Annotated[
        str | None,
        typer.Option("--component", help="The component edited (needed when there are several)."),
    ] = None,
    reason: ReasonOption = None,
    as_json: JsonOption = False,
    store_location: StoreOption = None,
) -> None:
    """Edit: the new text becomes a child of the candidate, scored on val like any child."""
    if (text is None) == (file is None):
        raise ConfigError("give the new text with --text or --file (one of them)")
    if file is not None:
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            why = getattr(exc, "strerror", None) or exc
            raise ConfigError(f"cannot read {file}: {why}") from None
    decided = approvals.decide(
        open_cli_store(store_location),
        id,
        "edit",
        reason=reason,
        text=text,
        component=component,
    )
    _report(decided, as_json)


def _report(decided: Approval, as_json: bool) -> None:
    if as_json:
        print_json(decided.model_dump(mode="json"))
        return
    done = f": {escape(decided.result)}" if decided.result else ""
    waits = "" if decided.applied else " (the job applies it when it reads it)"
    err.print(f"approval request {decided.id} {decided.status}{done}{waits}")


def _print_review(found: ApprovalReview) -> None:
    a = found.approval
    what = f"publish as {escape(a.target or '')}" if a.kind == "publish" else "become the best"
    out.print(
        f"[bold]approval request {a.id}[/bold] · job {a.job_id} ({escape(found.job_name)})"
        f" · {a.status}"
    )
    out.print(f"candidate {a.candidate_id} would {what}, replacing {found.current.label}")
    out.print(f"val: candidate {_summary(found.candidate.val)}")
    out.print(f"     {escape(found.current.label)} {_summary(found.current.val)}")
    if found.difference is not None:
        d = found.difference
        out.print(
            f"     difference {d.difference:+.1%} (95% CI {d.low:+.1%} to {d.high:+.1%},"
            f" n={d.n}): {d.verdict}"
        )
    if found.diff:
        out.print("\n[bold]diff[/bold]")
        out.print(escape(textwrap.indent(found.diff, "  ")), highlight=False)
    for sample in found.samples:
        out.print(f"\n[bold]{escape(sample.example_id)}[/bold] {escape(_brief(sample.input))}")
        for label, run in (("candidate", sample.candidate), (found.current.label, sample.current)):
            if run is not None:
                shown = _brief(run.output if run.error is None else f"error: {run.error}")
                out.print(f"  {escape(label)} ({run.score:.2f}): {escape(shown)}", highlight=False)


def _summary(value: ScoreSummary | None) -> str:
    return "-" if value is None else str(value)


def _score(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _brief(value: object, limit: int = 200) -> str:
    text = " ".join(str(value if value is not None else "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
