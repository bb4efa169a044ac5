"""The options ``emery train`` and ``emery eval`` share to change a config without editing
it (``--set``, ``--model``, ``--dataset``) and to read API keys from a file of their own
(``--env-file``; every command reads ``./.env`` when it starts, ``cli.app``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from emery.config.env_file import load_env_file
from emery.config.overrides import Overrides

SetOption = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        metavar="KEY=VALUE",
        help="Change one config value, e.g. job.budget.metric_calls=50 (a TOML value, else"
        " text); repeat for more.",
    ),
]
ModelOption = Annotated[
    str | None,
    typer.Option("--model", help="Task model (sets lm.task.model), e.g. local/qwen2.5-coder-0.5b."),
]
DatasetOption = Annotated[
    str | None,
    typer.Option(
        "--dataset",
        metavar="PATH|TASK",
        help="A data file (sets dataset.path) or a built-in task (sets dataset.task).",
    ),
]
EnvFileOption = Annotated[
    Path | None,
    typer.Option(
        "--env-file",
        help="KEY=VALUE lines (API keys) to add to the environment, after ./.env (read by"
        " every command when present), whose values they replace. Variables already set in"
        " the environment win.",
    ),
]


def command_line_overrides(
    sets: list[str] | None, model: str | None, dataset: str | None, env_file: Path | None
) -> Overrides:
    """Load ``--env-file`` when given, then the overrides these options ask for."""
    if env_file is not None:
        load_env_file(env_file)
    return Overrides(sets=tuple(sets or ()), model=model, dataset=dataset)
