"""``emery candidates JOB``: the candidates a job tried, best first, with lineage; from
the store here or, with ``--server``, from a server's API (the same table)."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Annotated, Any, Protocol

import typer
from rich.markup import escape
from rich.table import Table

from emery.algorithms.lineage import component_diff, lineage_tree
from emery.cli.common import JsonOption, ServerOption, StoreOption, open_cli_store, resolve
from emery.cli.console import out, print_json, print_table
from emery.core.errors import EmeryError
from emery.core.models import Candidate
from emery.evaluation.stats import failed_cell, failure_note, unreadable_note
from emery.sdk.server_client import ServerClient
from emery.store.protocol import Store
from emery.store.records import CandidateRecord

SPLITS = ("train", "val", "test")
Scores = dict[str, CandidateRecord | None]


class Candidates(Protocol):
    """Where a job's candidates are read from: a store, or a server's API."""

    job_id: str

    def ranked(self, split: str, sort: str, top: int) -> tuple[list[CandidateRecord], int]:
        """The ``top`` candidates in ``sort`` order with their runs on ``split``, and how
        many the job has."""
        ...

    def in_order(self, split: str) -> list[CandidateRecord]:
        """Every candidate in the order it was made, with its runs on ``split``."""
        ...

    def best_id(self) -> str | None: ...

    def one(self, candidate_id: str) -> tuple[Candidate, Scores]:
        """A candidate (id or prefix) and its runs on each split."""
        ...

    def parent_diff(self, candidate: Candidate) -> str:
        """Its diff against its first parent ("" when that parent is not the job's)."""
        ...


class StoreCandidates:
    def __init__(self, store: Store, job: str) -> None:
        self.store, self.job_id = store, resolve(store, job)

    def ranked(self, split: str, sort: str, top: int) -> tuple[list[CandidateRecord], int]:
        page = self.store.list_candidates(self.job_id, split=split, sort=sort, limit=top)
        return list(page.items), page.total

    def in_order(self, split: str) -> list[CandidateRecord]:
        page = self.store.list_candidates(self.job_id, split=split, sort="ordinal", limit=None)
        return list(page.items)

    def best_id(self) -> str | None:
        return self.store.get_job(self.job_id).best_candidate_id

    def one(self, candidate_id: str) -> tuple[Candidate, Scores]:
        candidate = self.store.get_candidate(self.job_id, candidate_id)
        listed = {
            split: self.store.list_candidates(self.job_id, split=split).items for split in SPLITS
        }
        scores = {
            split: next((c for c in items if c.id == candidate.id), None)
            for split, items in listed.items()
        }
        return candidate, scores

    def parent_diff(self, candidate: Candidate) -> str:
        try:
            parent = self.store.get_candidate(self.job_id, candidate.lineage.parents[0])
        except EmeryError:  # a parent from another job: nothing to diff against
            return ""
        return component_diff(parent, candidate, before_label="parent", after_label="candidate")


class ServerCandidates:
    """The same records built from a server's ``/api/jobs/J/scores``, ``candidates`` and
    ``candidates/C`` answers."""

    def __init__(self, client: ServerClient, job: str) -> None:
        view = client.job(job)
        self.client, self.job_id = client, str(view["id"])
        self._best: str | None = view.get("best_candidate_id")

    def ranked(self, split: str, sort: str, top: int) -> tuple[list[CandidateRecord], int]:
        records: list[CandidateRecord] = []
        while True:  # the server answers up to 1000 a page
            page = self.client.candidate_scores(
                self.job_id,
                split=split,
                sort=sort,
                limit=min(top - len(records), 1000),
                offset=len(records),
            )
            records += [CandidateRecord.model_validate(item) for item in page["candidates"]]
            total = int(page["total"])
            if len(records) >= min(top, total) or not page["candidates"]:
                return records, total

    def in_order(self, split: str) -> list[CandidateRecord]:
        listed = self.client.candidates(self.job_id)
        return [self._record(view, split) for view in listed["candidates"]]

    def best_id(self) -> str | None:
        return self._best

    def one(self, candidate_id: str) -> tuple[Candidate, Scores]:
        view = self.client.candidate(self.job_id, candidate_id)
        return Candidate.model_validate(view), {s: self._record(view, s) for s in SPLITS}

    def parent_diff(self, candidate: Candidate) -> str:
        return self.client.candidate_diff(self.job_id, candidate.id, "parent")

    def _record(self, view: dict[str, Any], split: str) -> CandidateRecord:
        """A candidate view's runs on ``split`` as the store's record (none: n = 0)."""
        runs = view["scores"].get(split) or {}
        return CandidateRecord(
            job_id=self.job_id,
            ordinal=view["ordinal"],
            candidate=Candidate.model_validate(view),
            **runs,
        )


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
    server: ServerOption = None,
    store_location: StoreOption = None,
) -> None:
    """A job's candidates with their mean score so far, failed runs, parents and operation.
    With --server, the job's candidates on that server (the same table, --show and --tree)."""
    if split not in SPLITS:
        raise EmeryError(f"--split must be train, val or test, not {split!r}")
    if server is not None:
        with ServerClient(server) as client:
            _candidates(ServerCandidates(client, job), show, tree, split, sort, top, as_json)
        return
    found = StoreCandidates(open_cli_store(store_location), job)
    _candidates(found, show, tree, split, sort, top, as_json)


def _candidates(
    found: Candidates,
    show: str | None,
    tree: bool,
    split: str,
    sort: str,
    top: int,
    as_json: bool,
) -> None:
    if show is not None:
        _show(found, show, as_json)
    elif tree:
        _tree(found, split, as_json)
    else:
        _list(found, split=split, sort=sort, top=top, as_json=as_json)


def _tree(found: Candidates, split: str, as_json: bool) -> None:
    """The lineage tree with scores on ``split``."""
    records = found.in_order(split)
    drawing = lineage_tree(
        [record.candidate for record in records],
        {record.id: record.score for record in records},
        best_id=found.best_id(),
    )
    if as_json:
        print_json({"tree": drawing})
    else:
        out.print(escape(drawing), highlight=False, soft_wrap=True)


def _list(found: Candidates, *, split: str, sort: str, top: int, as_json: bool) -> None:
    """The ``top`` candidates in ``sort`` order, as a table or JSON."""
    records, total = found.ranked(split, sort, top)
    if as_json:
        print_json(
            {
                "total": total,
                "candidates": [
                    {
                        **c.candidate.model_dump(mode="json"),
                        "score": c.score,
                        "n": c.n,
                        "failed": c.failed,
                        "timeouts": c.timeouts,
                        "unreadable": c.unreadable,
                    }
                    for c in records
                ],
            }
        )
        return
    print_table(_table(records, split, found.best_id()))
    out.print(f"{len(records)} of {total} candidates; * = the job's best")


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


def _show(found: Candidates, candidate_id: str, as_json: bool) -> None:
    candidate, scores = found.one(candidate_id)
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
        diff = found.parent_diff(candidate)
        if diff:
            out.print(f"\n[bold]{escape('[diff against the first parent]')}[/bold]")
            out.print(escape(textwrap.indent(diff, "  ")), highlight=False)
