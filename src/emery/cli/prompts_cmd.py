"""``emery publish JOB --name NAME`` and ``emery prompts list|show|rollback|alias``: a job's
best candidate as a named, versioned prompt that applications fetch (``emery.prompt``) or
run whole (``emery.load``, ``/systems/NAME/run``), at a version or an alias."""

from __future__ import annotations

import textwrap
from datetime import UTC, datetime, timedelta
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from emery.cli.common import JsonOption, StoreOption, open_cli_store
from emery.cli.console import err, out, print_json, print_table
from emery.core.errors import ConfigError
from emery.reports import aliases, published
from emery.reports.approvals import request_publish
from emery.reports.published import PublishedPrompt
from emery.reports.version_scores import version_scores
from emery.store.protocol import Store

NameArgument = Annotated[str, typer.Argument(help="The prompt's name.")]

app = typer.Typer(help="List, show, roll back and alias published prompts.", no_args_is_help=True)


def publish(
    job: Annotated[str, typer.Argument(help="Job id, id prefix or name (a succeeded job).")],
    name: Annotated[str, typer.Option("--name", help="The prompt's name.")],
    request: Annotated[
        bool,
        typer.Option(
            "--request",
            help="Ask for approval instead: `emery approvals approve ID` publishes it.",
        ),
    ] = False,
    as_json: JsonOption = False,
    store_location: StoreOption = None,
) -> None:
    """Publish a succeeded job's best candidate as the next version of a named prompt."""
    if request:
        _request(open_cli_store(store_location), job, name, as_json)
        return
    prompt = published.publish(open_cli_store(store_location), job, name)
    if as_json:
        print_json(prompt.model_dump(mode="json"))
        return
    err.print(
        f"published {escape(prompt.name)} version {prompt.version}"
        f" (job {prompt.job_id}, candidate {prompt.candidate_id[:12]})"
    )


def _request(store: Store, job: str, name: str, as_json: bool) -> None:
    asked = request_publish(store, job, name)
    if as_json:
        print_json(asked.model_dump(mode="json"))
        return
    err.print(
        f"approval request {asked.id}: publish candidate {asked.candidate_id[:12]} of job"
        f" {asked.job_id} as {escape(name)} once approved (emery approvals approve {asked.id})"
    )


@app.command("list")
def list_prompts(
    name: Annotated[
        str | None, typer.Argument(help="List this prompt's versions (default: every prompt).")
    ] = None,
    as_json: JsonOption = False,
    store_location: StoreOption = None,
) -> None:
    """Each published prompt's latest version, or every version of one prompt."""
    store = open_cli_store(store_location)
    prompts = published.latest_versions(store) if name is None else published.versions(store, name)
    if as_json:
        print_json({"prompts": [p.model_dump(mode="json") for p in prompts]})
        return
    if not prompts:
        out.print("no published prompts (emery publish JOB --name NAME makes one)")
        return
    table = Table()
    for header in ("name", "version", "job", "candidate", "val", "test", "published"):
        table.add_column(header, overflow="fold" if header == "name" else "ellipsis")
    for prompt in prompts:
        table.add_row(
            escape(prompt.name),
            _version(prompt),
            prompt.job_id,
            prompt.candidate_id[:12],
            _score(prompt.scores.val),
            _score(prompt.scores.test),
            f"{prompt.published_at:%Y-%m-%d %H:%M}" if prompt.published_at else "-",
        )
    print_table(table)


@app.command("show")
def show(
    name: NameArgument,
    version: Annotated[
        int | None, typer.Option("--version", help="This version (default: the latest).")
    ] = None,
    as_json: JsonOption = False,
    store_location: StoreOption = None,
) -> None:
    """A version of a prompt: its components, where it came from, its scores and diff."""
    prompt = published.show(open_cli_store(store_location), name, version)
    if as_json:
        print_json(prompt.model_dump(mode="json"))
        return
    _print(prompt)


@app.command("rollback")
def rollback(
    name: NameArgument,
    to: Annotated[int, typer.Option("--to", help="The version to serve again.")],
    as_json: JsonOption = False,
    store_location: StoreOption = None,
) -> None:
    """Publish an older version again as the newest one (the history is kept)."""
    prompt = published.rollback(open_cli_store(store_location), name, to)
    if as_json:
        print_json(prompt.model_dump(mode="json"))
        return
    err.print(f"{escape(prompt.name)} version {prompt.version} repeats version {to}")


@app.command("alias")
def alias(
    name: NameArgument,
    alias_name: Annotated[str, typer.Argument(metavar="ALIAS", help="e.g. production, staging.")],
    versions: Annotated[
        list[str] | None,
        typer.Argument(
            help="The version it names (3), or a split of traffic (3=90 4=10); none: show it."
        ),
    ] = None,
    shadow: Annotated[
        int | None,
        typer.Option(
            "--shadow",
            min=1,
            help="A version run on a copy of each request the server answers through the"
            " alias, its output not answered (compare it with `emery prompts scores`).",
        ),
    ] = None,
    scorer: Annotated[
        str | None,
        typer.Option(
            "--scorer",
            metavar="NAME:VERSION",
            help="A published verifier graph that scores every run of the alias and its shadow.",
        ),
    ] = None,
    as_json: JsonOption = False,
    store_location: StoreOption = None,
) -> None:
    """Point an alias of a prompt at a version or a split of versions, or show it.

    `POST /systems/NAME/run?alias=ALIAS` and `emery.load(NAME, alias=ALIAS)` run
    the version it picks; a split picks by the request's X-Emery-Split-Key
    (the same key, the same version), else at random by the weights. On the
    server, --shadow and --scorer run and score a candidate beside it.
    """
    store = open_cli_store(store_location)
    if versions:
        weights = aliases.parse_weights(versions)
        target = aliases.set_alias(store, name, alias_name, weights, shadow=shadow, scorer=scorer)
    elif shadow is not None or scorer is not None:
        raise ConfigError(
            "--shadow and --scorer go with the versions the alias serves (3 or 3=90 4=10)"
        )
    else:
        target = aliases.get_alias(store, name, alias_name)
    if as_json:
        print_json(target.model_dump(mode="json"))
        return
    out.print(f"{escape(name)} {escape(alias_name)} → version {target.describe()}")


@app.command("scores")
def scores(
    name: NameArgument,
    since_days: Annotated[
        float | None, typer.Option("--since-days", min=0.0, help="Only runs this recent.")
    ] = None,
    as_json: JsonOption = False,
    store_location: StoreOption = None,
) -> None:
    """Each version's live traffic: runs served (/systems/NAME/run), failed runs, runs
    with feedback, and the mean feedback score with its 95% interval."""
    since = None if since_days is None else datetime.now(UTC) - timedelta(days=since_days)
    rows = version_scores(open_cli_store(store_location), name, since)
    if as_json:
        print_json({"name": name, "versions": [row.model_dump(mode="json") for row in rows]})
        return
    if not rows:
        out.print(f"no runs of {escape(name)} served yet (POST /systems/{escape(name)}/run)")
        return
    table = Table()
    headers = ("version", "runs", "failed", "rated", "feedback (95%)", "scored", "score (95%)")
    for header in headers:
        table.add_column(header)
    shadows = any(row.shadow for row in rows)
    if shadows:
        table.add_column("shadow - served (95%)")
        table.add_column("same output")
    for row in rows:
        cells = [
            f"{row.version} (shadow)" if row.shadow else str(row.version),
            str(row.runs),
            str(row.failed),
            str(row.rated),
            _with_interval(row.mean, row.low, row.high),
            str(row.scored),
            _with_interval(row.score, row.score_low, row.score_high),
        ]
        if shadows:
            against = row.against_served
            cells += [
                "-"
                if against is None
                else f"{against.difference:+.1%} [{against.low:+.1%}, {against.high:+.1%}]"
                f" n={against.n}",
                "-" if row.same_output is None else f"{row.same_output:.0%}",
            ]
        table.add_row(*cells)
    print_table(table)


def _with_interval(mean: float | None, low: float | None, high: float | None) -> str:
    interval = f" [{low:.1%}, {high:.1%}]" if low is not None and high is not None else ""
    return f"{_score(mean)}{interval}"


def _print(prompt: PublishedPrompt) -> None:
    out.print(f"[bold]{escape(prompt.name)} version {_version(prompt)}[/bold]")
    out.print(f"job {prompt.job_id} ({escape(prompt.job_name)}) · candidate {prompt.candidate_id}")
    scores = prompt.scores
    out.print(
        f"val {_score(scores.val)} (seed {_score(scores.seed_val)})"
        f" · test {_score(scores.test)} (seed {_score(scores.seed_test)})"
    )
    for component, text in prompt.components.items():
        out.print(f"\n[bold][{escape(component)}][/bold]")
        out.print(escape(textwrap.indent(text or "(empty)", "  ")), highlight=False)
    for stage, demos in prompt.demos.items():
        out.print(f"\n[bold][{escape(stage)} demos][/bold]")
        for demo in demos:
            out.print(escape(f"  {demo.inputs} → {demo.output}"), highlight=False)
    if prompt.diff:
        out.print(f"\n[bold]{escape('[diff against the seed]')}[/bold]")
        out.print(escape(textwrap.indent(prompt.diff, "  ")), highlight=False)


def _version(prompt: PublishedPrompt) -> str:
    again = f" (= v{prompt.rolled_back_to})" if prompt.rolled_back_to is not None else ""
    return f"{prompt.version}{again}"


def _score(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"
