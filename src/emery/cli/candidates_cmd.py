"""``emery candidates JOB``: the candidates a job tried, best first, with lineage."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from emery.algorithms.lineage import component_diff, lineage_tree
from emery.cli.common import JsonOption, StoreOption, open_cli_store, resolve
from emery.cli.console import out, print_json, print_table
from emery.core.errors import EmeryError
from emery.evaluation.stats import failed_cell, failure_note, unreadable_note
from emery.store.protocol import Store
from emery.store.records import CandidateRecord


def candidates(
    job: Annotated[str, typer.Argument(help="Job id, id prefix or name.")],
    top: Annotated[int, typer.Option("--top", min=1, help="Show the N best.")] = 10,
    show: Annotated[
        str | None, typer.Option("--show", help="Show one candidate in full (id or prefix).")
    ] = None,
    tree: Annotated[
        bool, typer.Option("--tree", help="Show the lineage tree with scores.")
    ] = False,
    split: Annotated[str, typer.Option(help="Score on train, val or test.")] = "val",
    sort: Annotated[
        str, typer.Option(help="score, n, failed, ordinal, generation; - for descending.")
    ] = "-score,-n,ordinal",
    as_json: JsonOption = False,
    store_location: StoreOption = None,
) -> None:
    """A job's candidates with their mean score so far, failed runs, parents and operation."""
    if split not in ("train", "val", "test"):
        raise EmeryError(f"--split must be train, val or test, not {split!r}")
    store = open_cli_store(store_location)
    job_id = resolve(store, job)
    if show is not None:
        _show(store, job_id, show, as_json)
    elif tree:
        _tree(store, job_id, split, as_json)
    else:
        _list(store, job_id, split=split, sort=sort, top=top, as_json=as_json)


def _tree(store: Store, job_id: str, split: str, as_json: bool) -> None:
    """The lineage tree with scores on ``split``."""
    records = store.list_candidates(job_id, split=split, sort="ordinal", limit=None).items
    drawing = lineage_tree(
        [record.candidate for record in records],
        {record.id: record.score for record in records},
        best_id=store.get_job(job_id).best_candidate_id,
    )
    if as_json:
        print_json({"tree": drawing})
    else:
        out.print(escape(drawing), highlight=False, soft_wrap=True)


def _list(store: Store, job_id: str, *, split: str, sort: str, top: int, as_json: bool) -> None:
    """The ``top`` candidates in ``sort`` order, as a table or JSON."""
    page = store.list_candidates(job_id, split=split, sort=sort, limit=top)
    if as_json:
        print_json(
            {
                "total": page.total,
                "candidates": [
                    {
                        **c.candidate.model_dump(mode="json"),
                        "score": c.score,
                        "n": c.n,
                        "failed": c.failed,
                        "timeouts": c.timeouts,
                        "unreadable": c.unreadable,
                    }
                    for c in page.items
                ],
            }
        )
        return
    print_table(_table(page.items, split, store.get_job(job_id).best_candidate_id))
    out.print(f"{len(page.items)} of {page.total} candidates; * = the job's best")


def _table(records: Sequence[CandidateRecord], split: str, best_id: str | None) -> Table:
    table = Table()
    headers = (
        "#",
        "id",
        split,
        "n",
        "failed",
        "unreadable",
        "operation",
        "gen",
        "parents",
        "components",
    )
    for header in headers:
        table.add_column(
            header,
            no_wrap=header == split,
            overflow="fold" if header in ("id", "components") else "ellipsis",
        )
    for rank, record in enumerate(records, 1):
        lineage = record.candidate.lineage
        marker = " *" if record.id == best_id else ""
        table.add_row(
            str(rank),
            record.id + marker,
            "-" if record.score is None else f"{record.score:.1%}",
            str(record.n),
            failed_cell(record.failed, record.timeouts),
            str(record.unreadable),
            lineage.operation,
            str(lineage.generation),
            ", ".join(p[:8] for p in lineage.parents) or "-",
            escape(", ".join(record.candidate.components)),
        )
    return table


def _show(store: Store, job_id: str, candidate_id: str, as_json: bool) -> None:
    candidate = store.get_candidate(job_id, candidate_id)
    scores = {
        split: next(
            (c for c in store.list_candidates(job_id, split=split).items if c.id == candidate.id),
            None,
        )
        for split in ("train", "val", "test")
    }
    if as_json:
        print_json(
            {
                **candidate.model_dump(mode="json"),
                "scores": {
                    split: {
                        "score": rec.score,
                        "n": rec.n,
                        "failed": rec.failed,
                        "timeouts": rec.timeouts,
                        "unreadable": rec.unreadable,
                    }
                    if rec
                    else None
                    for split, rec in scores.items()
                },
            }
        )
        return
    lineage = candidate.lineage
    out.print(f"[bold]candidate {candidate.id}[/bold]")
    out.print(
        f"operation {lineage.operation} · generation {lineage.generation}"
        f" · parents {', '.join(lineage.parents) or '-'}"
        + (f" · iteration {lineage.iteration}" if lineage.iteration is not None else "")
    )
    for split, record in scores.items():
        if record is not None and record.n:
            failed = failure_note(record.failed, record.timeouts, ", ")
            failed += unreadable_note(record.unreadable, ", ")
            out.print(f"{split}: {record.score:.1%} on {record.n} examples{failed}")
    for name, text in candidate.components.items():
        out.print(f"\n[bold][{escape(name)}][/bold]")
        out.print(escape(textwrap.indent(text or "(empty)", "  ")), highlight=False)
    for stage, demos in candidate.demos.items():
        out.print(f"\n[bold][{escape(stage)} demos][/bold]")
        for demo in demos:
            out.print(escape(f"  {demo.inputs} → {demo.output}"), highlight=False)
    if lineage.parents:
        try:
            parent = store.get_candidate(job_id, lineage.parents[0])
        except EmeryError:  # a parent from another job: nothing to diff against
            return
        diff = component_diff(parent, candidate, before_label="parent", after_label="candidate")
        if diff:
            out.print(f"\n[bold]{escape('[diff against the first parent]')}[/bold]")
            out.print(escape(textwrap.indent(diff, "  ")), highlight=False)
