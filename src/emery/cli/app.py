"""The ``emery`` command line: errors are one line and a non-zero exit, never a traceback."""

from __future__ import annotations

import logging
import sys

import typer
from rich.markup import escape

from emery.cli import (
    candidates_cmd,
    eval_cmd,
    export_cmd,
    jobs_cmd,
    models_cmd,
    report_cmd,
    serve_cmd,
    taskapp_cmd,
    train_cmd,
)
from emery.cli.console import err
from emery.core.errors import EmeryError

app = typer.Typer(
    name="emery",
    help="emery: optimize prompts, agents and workflows on local or remote models.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command("eval")(eval_cmd.evaluate)
app.command("train")(train_cmd.train)
app.add_typer(jobs_cmd.app, name="jobs")
app.command("candidates")(candidates_cmd.candidates)
app.command("report")(report_cmd.report)
app.add_typer(models_cmd.app, name="models")
app.command("serve")(serve_cmd.serve)
app.add_typer(taskapp_cmd.app, name="taskapp")
app.command("export")(export_cmd.export)

USAGE_ERROR = 2


def main(argv: list[str] | None = None) -> None:
    """Entry point of the console script."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    command = typer.main.get_command(app)
    try:
        code = command.main(args=argv, prog_name="emery", standalone_mode=False)
    except EmeryError as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}", soft_wrap=True)
        sys.exit(USAGE_ERROR)
    except typer.TyperException as exc:
        # Typer vendors click: its usage errors derive from TyperException, not click's.
        show = getattr(exc, "show", None)
        if callable(show):
            show()
        else:
            err.print(f"[red]error:[/red] {escape(exc.format_message())}", soft_wrap=True)
        sys.exit(exc.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        err.print("interrupted")
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)
