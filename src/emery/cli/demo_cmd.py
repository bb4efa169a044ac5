"""``emery demo``: the main job. Optimize the word-problems prompt on the embedded model and
show the lift on a test split the search never saw."""

from __future__ import annotations

import textwrap
import tomllib
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from emery.cli.common import StoreOption, open_cli_store
from emery.cli.console import err, out
from emery.cli.foreground import run_foreground
from emery.cli.train_cmd import finish
from emery.config.loading import parse_config
from emery.config.schema import JobConfig
from emery.core.hashing import content_hash
from emery.core.models import Candidate
from emery.evaluation.stats import ScoreSummary
from emery.jobs.manage import create_job, find_resumable
from emery.lm.config import local_model_path
from emery.reports.html_report import gather, write_html
from emery.reports.job_result import JobResult, result_paths

DEMO_CONFIG = "word_problems.toml"


def demo_config_text() -> str:
    """The packaged demo config (also a starting point for your own jobs)."""
    return (resources.files("emery") / "demos" / DEMO_CONFIG).read_text(encoding="utf-8")


def _config(algorithm: str | None, metric_calls: int | None) -> tuple[JobConfig, dict[str, Any]]:
    data = tomllib.loads(demo_config_text())
    if algorithm is not None:
        data["job"]["algorithm"] = algorithm
    if metric_calls is not None:
        data["job"]["budget"]["metric_calls"] = metric_calls
    config = parse_config(data, "demo config")
    for role in ("task", "reflection", "proposer"):
        model = config.lm.for_role(role).model
        if model.startswith("local/"):
            local_model_path(model.removeprefix("local/"))  # a missing model: the fix, in one line
    return config, data


def demo(
    algorithm: Annotated[
        str | None, typer.Option(help="Search algorithm (default: the demo config's).")
    ] = None,
    metric_calls: Annotated[
        int | None, typer.Option(min=1, help="Metric-call budget (default: the config's).")
    ] = None,
    stream_format: Annotated[
        str, typer.Option("--stream-format", help="cli (event lines), chart (live) or none.")
    ] = "cli",
    new: Annotated[
        bool, typer.Option("--new", help="Start a new demo job even if one can be resumed.")
    ] = False,
    show_config: Annotated[
        bool, typer.Option("--show-config", help="Print the demo config and exit.")
    ] = False,
    store_location: StoreOption = None,
) -> None:
    """Optimize the built-in word-problems prompt on local/qwen2.5-coder-0.5b and report the
    baseline and optimized scores on the held-out test split."""
    if show_config:
        out.print(escape(demo_config_text()), highlight=False, end="", soft_wrap=True)
        return
    config, data = _config(algorithm, metric_calls)
    store = open_cli_store(store_location)
    job = None if new else find_resumable(store, content_hash(config.model_dump(mode="json")))
    if job is not None:
        err.print(f"resuming demo job {job.id} ({job.state}); start over with --new")
    else:
        job = create_job(store, config, given=data, base_dir=Path.cwd(), name="demo")
        err.print(
            f"created job [bold]{job.id}[/bold]: {config.job.algorithm} on"
            f" {config.dataset.task} with {config.lm.task.model},"
            f" budget {config.job.budget.metric_calls} metric calls"
        )
    outcome = run_foreground(store, job.id, stream=stream_format)  # type: ignore[arg-type]
    record = outcome.job
    if record.state != "succeeded" or not record.result:
        finish(store, outcome, as_json=False)
        return
    result = JobResult.model_validate(record.result)
    json_path, text_path = result_paths(record, Path(record.base_dir or "."))
    html_path = write_html(gather(store, record, result), json_path.with_suffix(".html"))
    out.print(
        escape(summary(result, config, [text_path, json_path, html_path])), end="", soft_wrap=True
    )


def _score(summary: ScoreSummary | None) -> str:
    if summary is None:
        return "not scored"
    return f"{summary.mean:6.1%}  (95% CI {summary.low:.1%}–{summary.high:.1%})"


def _prompt(candidate: Candidate) -> list[str]:
    lines = []
    for name, text in candidate.components.items():
        lines.append(f"  [{name} instruction]")
        lines += textwrap.indent(text or "(empty)", "    ").splitlines()
        for index, demo in enumerate(candidate.demos.get(name, ()), 1):
            lines.append(f"  [{name} demo {index}]")
            for field, value in demo.inputs.items():
                lines += _turn("user", f"{field}: {value}")
            lines += _turn("assistant", demo.output)
    return lines


def _turn(role: str, text: str) -> list[str]:
    """``role> first line`` with the following lines indented under it."""
    head = f"    {role}> "
    first, *rest = text.splitlines() or [""]
    return [head + first, *(" " * len(head) + line if line.strip() else "" for line in rest)]


def summary(result: JobResult, config: JobConfig, files: list[Path]) -> str:
    """What the demo prints at the end."""
    n_test = result.best_test.n if result.best_test else result.dataset_sizes.get("test", 0)
    lines = [
        "",
        f"emery demo · {config.dataset.task} · {config.lm.task.model} · {result.algorithm}"
        f" · seed {config.job.seed} · job {result.job_id}",
        f"Test split, never used during the search: {n_test} examples",
        f"  baseline prompt   {_score(result.baseline_test)}",
        f"  optimized prompt  {_score(result.best_test)}",
    ]
    for name, reference in result.references_test.items():
        lines.append(f"  {name + ' prompt':<17} {_score(reference)}")
    if result.lift_abs is not None and result.lift_split == "test":
        lines.append(f"  lift over the baseline {result.lift_abs * 100:+.1f} points")
    if result.best_test is not None:
        for name, reference in result.references_test.items():
            lift = (result.best_test.mean - reference.mean) * 100
            lines.append(f"  lift over the {name} prompt {lift:+.1f} points")
    if result.best_candidate is not None:
        lines += ["", "Optimized prompt (in full):"]
        lines += _prompt(result.best_candidate)
    budget, limits = result.budget, result.limits
    usage = result.usage
    calls = ", ".join(
        f"{role} {u.calls} ({u.cache_hits} cached)" for role, u in sorted(usage.items())
    )
    lines += [
        "",
        f"Budget used: {budget.metric_calls} of {limits.metric_calls or '∞'} metric calls,"
        f" {budget.proposals} proposals, search {budget.wall_time_s / 60:.1f} min"
        f" (stopped: {result.stop_reason or 'done'})",
        f"LM calls: {calls}",
        "Reports: " + ", ".join(str(path) for path in files),
        "",
    ]
    return "\n".join(lines)
