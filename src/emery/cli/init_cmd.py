"""``emery init [DATA]``: write a commented job config for a data file or a built-in task."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from emery.cli.console import err, interactive
from emery.config.loading import load_config
from emery.config.overrides import data_source
from emery.config.starter import default_task_sentence, file_config, task_config
from emery.core.errors import ConfigError
from emery.data.profile import DataProfile, profile

DEFAULT_TASK = "word_problems"


def init(
    data: Annotated[
        str | None,
        typer.Argument(
            metavar="DATA",
            help="A .jsonl, .csv or task-set .json file, or a built-in task name.",
        ),
    ] = None,
    output: Annotated[
        Path, typer.Option("--output", "-o", help="Where to write the config.")
    ] = Path("emery.toml"),
    force: Annotated[
        bool, typer.Option("--force", help="Overwrite the output file if it exists.")
    ] = False,
) -> None:
    """Write a commented job config for a data file or a built-in task, ready for emery train.

    It guesses the input and output columns, the verifier (numbers, a few labels, JSON
    objects or free text), the splits and a seed prompt that states the output format. On a
    terminal it asks what it cannot guess; otherwise it picks defaults and says so.
    """
    if output.exists() and not force:
        raise ConfigError(f"{output} already exists; pass --force to overwrite it")
    if data is None:
        data = _ask("data file or built-in task", DEFAULT_TASK, "no DATA given")
    command = shlex.join(["emery", "init", data])
    kind, source = data_source(data, option="")
    if kind == "task":
        text = task_config(source, command)
    else:
        found = profile(Path(source))
        output_column = _output_column(found)
        found.check(output_column)
        sentence = default_task_sentence(found.inputs(output_column), output_column)
        task = found.description.strip() or _ask("what should the model do", sentence, "")
        text = file_config(found, output_column, task, output.parent, command)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text, encoding="utf-8")
    config = load_config(output)  # what emery train will read
    err.print(
        f"wrote {escape(str(output))} ({config.job.algorithm}, {config.lm.task.model});"
        f" run it: emery train {escape(str(output))}",
        soft_wrap=True,
    )


def _output_column(found: DataProfile) -> str:
    """The gold output's column: the one the rows or a known name say, else asked (on a
    terminal) or the last column."""
    if found.output is not None:
        return found.output
    last = found.columns[-1]
    if not interactive():
        err.print(
            f"no terminal: took the last column {last!r} as the gold output"
            " (dataset.fields.expected_field)",
            soft_wrap=True,
        )
        return last
    choice: str = typer.prompt(
        f"which column holds the gold output? ({', '.join(found.columns)})",
        default=last,
        err=True,
    )
    if choice not in found.columns:
        raise ConfigError(f"no column {choice!r}; the columns: {', '.join(found.columns)}")
    return choice


def _ask(question: str, default: str, why: str) -> str:
    """The answer on a terminal; ``default`` (said on stderr) without one."""
    if interactive():
        answer: str = typer.prompt(question, default=default, err=True)
        return answer.strip() or default
    reason = f"{why}; " if why else ""
    err.print(f"no terminal to ask {question!r}: {reason}using {escape(default)}", soft_wrap=True)
    return default
