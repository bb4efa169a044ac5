"""The ``emery`` command line: errors are one line and a non-zero exit, never a traceback."""

from __future__ import annotations

import importlib
import logging
import sys
from typing import Any

import typer
import typer.core
from rich.markup import escape

from emery.cli.console import err
from emery.cli.help_text import unwrap_help
from emery.config.env_file import load_env_file
from emery.core.errors import EmeryError

# Each command's module is imported only when that command runs, so `emery jobs pause`
# does not load the optimizers, the HTTP server or matplotlib.
COMMANDS: dict[str, tuple[str, str]] = {
    "init": ("emery.cli.init_cmd", "init"),
    "demo": ("emery.cli.demo_cmd", "demo"),
    "eval": ("emery.cli.eval_cmd", "evaluate"),
    "train": ("emery.cli.train_cmd", "train"),
    "run": ("emery.cli.run_cmd", "run"),
    "jobs": ("emery.cli.jobs_cmd", "app"),
    "candidates": ("emery.cli.candidates_cmd", "candidates"),
    "report": ("emery.cli.report_cmd", "report"),
    "models": ("emery.cli.models_cmd", "app"),
    "proxy": ("emery.cli.proxy_cmd", "proxy"),
    "server": ("emery.cli.server_cmd", "server"),
    "runner": ("emery.cli.runner_cmd", "runner"),
    "workers": ("emery.cli.runner_cmd", "workers"),
    "taskapp": ("emery.cli.taskapp_cmd", "app"),
    "export": ("emery.cli.export_cmd", "export"),
    "publish": ("emery.cli.prompts_cmd", "publish"),
    "prompts": ("emery.cli.prompts_cmd", "app"),
    "approvals": ("emery.cli.approvals_cmd", "app"),
    "dataset": ("emery.cli.dataset_cmd", "app"),
    "store": ("emery.cli.store_cmd", "app"),
}

# Old command names that still work, hidden from the help, for one release: old -> new.
HIDDEN_ALIASES: dict[str, str] = {"serve": "proxy"}


class LazyCommands(typer.core.TyperGroup):
    """A command group that imports a subcommand's module when it is looked up."""

    def list_commands(self, ctx: Any) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name in HIDDEN_ALIASES:
            new = HIDDEN_ALIASES[cmd_name]
            err.print(
                f"`emery {cmd_name}` is now `emery {new}`; the old name goes in the next release."
            )
            alias = self.get_command(ctx, new)
            alias.hidden = True
            return alias
        if cmd_name not in COMMANDS:
            return None
        module, attribute = COMMANDS[cmd_name]
        target = getattr(importlib.import_module(module), attribute)
        if isinstance(target, typer.Typer):
            command: Any = typer.main.get_group(target)  # a group even with one subcommand
        else:
            single = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
            single.command(cmd_name)(target)
            command = typer.main.get_command(single)
        command.name = cmd_name
        unwrap_help(command)
        return command


app = typer.Typer(
    name="emery",
    cls=LazyCommands,
    help="emery: optimize prompts, agents and workflows on local or remote models.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root() -> None:
    """emery: optimize prompts, agents and workflows on local or remote models."""
    # Every command reads ./.env (API keys, EMERY_STORE) before it runs; variables already
    # set in the environment win. A malformed file is a one-line error.
    load_env_file()


USAGE_ERROR = 2


def main(argv: list[str] | None = None) -> None:
    """Entry point of the console script."""
    try:
        _main(argv)
    finally:  # on every exit, Ctrl-C included: no decoder thread outlives the command
        _stop_local_models()


def _stop_local_models() -> None:
    """Stop the local models' decoder threads (none ran unless their module was loaded)."""
    batchers = sys.modules.get("emery.lm.llama_batcher")
    if batchers is not None:
        batchers.stop_batchers()


def _main(argv: list[str] | None) -> None:
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
