"""``emery eval``: score the configured system on one split."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Annotated, Literal

import typer
from rich.table import Table

from emery.cli.console import err, out, print_json, print_table, progress_bar
from emery.cli.override_options import (
    DatasetOption,
    EnvFileOption,
    ModelOption,
    SetOption,
    command_line_overrides,
)
from emery.config.loading import parse_config
from emery.config.overrides import Overrides, load_overridden
from emery.config.schema import JobConfig
from emery.core.errors import ConfigError, EmeryError
from emery.core.example_result import ExampleResult
from emery.jobs.evaluate import EvaluationReport, evaluate_config
from emery.verifiers.base import as_text, clip


def _config(
    config_path: Path | None,
    task: str | None,
    overrides: Overrides,
    limit: int | None,
    concurrency: int | None,
) -> JobConfig:
    if config_path is not None and task is not None:
        raise ConfigError("give a CONFIG file or --task, not both")
    if config_path is None and task is None and overrides.dataset is None:
        raise ConfigError(
            "give a CONFIG file or --task NAME (or --dataset PATH; see `emery eval --help`)"
        )
    if config_path is not None:
        config, _ = load_overridden(config_path, overrides)
    else:
        given = overrides.apply({"dataset": {"task": task}} if task is not None else {})
        config = parse_config(given, "--task" if task is not None else "--dataset")
    updates = config.model_dump()
    if limit is not None:
        updates["dataset"]["limit"] = limit
    if concurrency is not None:
        updates["runtime"]["concurrency"] = concurrency
    return parse_config(updates, str(config_path or "--task"))


def evaluate(
    config_path: Annotated[
        Path | None, typer.Argument(metavar="CONFIG", help="Job config (.toml or .json).")
    ] = None,
    task: Annotated[str | None, typer.Option(help="A built-in task instead of a config.")] = None,
    model: ModelOption = None,
    split: Annotated[str, typer.Option(help="train, val or test.")] = "test",
    limit: Annotated[int | None, typer.Option(min=1, help="At most N examples per split.")] = None,
    concurrency: Annotated[int | None, typer.Option(min=1, help="Examples run at once.")] = None,
    failures: Annotated[
        bool, typer.Option("--failures", help="List every failed example.")
    ] = False,
    output: Annotated[Path | None, typer.Option(help="Where to write the JSON result.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    sets: SetOption = None,
    dataset: DatasetOption = None,
    env_file: EnvFileOption = None,
    server: Annotated[
        str | None,
        typer.Option(
            "--server",
            help="Not taken: eval runs the system here and stores no job ($EMERY_SERVER is"
            " not read). To score on a server, run an eval job there: emery train CONFIG"
            " --server URL --set job.algorithm=baseline (the seed scored on val and test),"
            " then emery report JOB --server URL.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Score the configured prompt program on one split and report accuracy with a 95% CI.
    It runs here, on this machine (--server is refused: see its help)."""
    if server is not None:
        raise EmeryError(
            "emery eval runs here and takes no --server: to score on the server, run"
            f" emery train CONFIG --server {server} --set job.algorithm=baseline"
            f" (an eval job), then emery report JOB --server {server}"
        )
    if split not in ("train", "val", "test"):
        raise ConfigError(f"--split must be train, val or test, not {split!r}")
    chosen: Literal["train", "val", "test"] = split  # type: ignore[assignment]
    overrides = command_line_overrides(sets, model, dataset, env_file)
    config = _config(config_path, task, overrides, limit, concurrency)
    base_dir = config_path.parent if config_path is not None else Path.cwd()
    report = _run(config, chosen, base_dir, quiet=as_json)
    target = output or _default_output(base_dir, config, chosen)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(report.model_dump_json(indent=2))
    if as_json:
        print_json(report.model_dump(mode="json", exclude={"results"}) | {"output": str(target)})
        return
    _print_report(report, failures)
    out.print(f"result written to {target}")


def _run(
    config: JobConfig, split: Literal["train", "val", "test"], base_dir: Path, quiet: bool
) -> EvaluationReport:
    with progress_bar(disable=quiet) as progress:
        task_id = progress.add_task(f"eval {split}", total=None, status="loading")
        correct = [0.0, 0]

        def started(total: int) -> None:
            progress.update(task_id, total=total, status="")

        def finished(result: ExampleResult) -> None:
            correct[0] += result.score
            correct[1] += 1
            progress.update(task_id, advance=1, status=f"mean {correct[0] / correct[1]:.1%}")

        return asyncio.run(
            evaluate_config(
                config, split=split, base_dir=base_dir, on_start=started, on_result=finished
            )
        )


def _default_output(base_dir: Path, config: JobConfig, split: str) -> Path:
    name = config.job.name or config.dataset.task or Path(config.dataset.path or "data").stem
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return base_dir / "results" / f"eval-{name}-{split}-{stamp}.json"


def _print_report(report: EvaluationReport, failures: bool) -> None:
    summary = report.summary
    out.print(
        f"[bold]{report.dataset}[/bold] · {report.split} · {summary.n} examples · "
        f"score [bold]{summary.mean:.1%}[/bold] (95% CI {summary.low:.1%}–{summary.high:.1%})"
    )
    task_usage = report.usage.get("task")
    if task_usage is not None:
        out.print(
            f"{task_usage.calls} LM calls ({task_usage.cache_hits} cached), "
            f"{task_usage.prompt_tokens} prompt + {task_usage.completion_tokens} completion"
            " tokens, "
            f"{report.wall_time_s:.1f}s"
        )
    errors = sum(1 for result in report.results if result.error)
    if errors:
        out.print(f"[yellow]{errors} runs failed[/yellow] (scored 0); --failures lists them")
    unreadable = sum(1 for result in report.results if result.unreadable is not None)
    if unreadable:
        out.print(
            f"{unreadable} replies the parser could not read (scored 0 as wrong answers);"
            " --failures lists them"
        )
    if failures:
        failed = [result for result in report.results if result.score < 1.0]
        table = Table(show_lines=False)
        table.add_column("example", overflow="fold")
        for header in ("score", "output", "feedback"):
            table.add_column(header)
        for result in failed:
            table.add_row(
                result.example_id,
                f"{result.score:.2f}",
                clip(as_text(result.output) if result.error is None else "", 60),
                clip(result.feedback, 100),
            )
        print_table(table)
    err.print("")
