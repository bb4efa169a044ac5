"""``emery train [CONFIG]``: validate a job config, store the job and run it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from emery.cli.common import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    JsonOption,
    QuietOption,
    ServerOption,
    StoreOption,
    open_cli_store,
)
from emery.cli.console import err, interactive, out, print_json
from emery.cli.foreground import ForegroundOutcome, run_foreground
from emery.cli.override_options import (
    DatasetOption,
    EnvFileOption,
    ModelOption,
    SetOption,
    command_line_overrides,
)
from emery.cli.progress import StreamFormat
from emery.cli.remote import train_on_server
from emery.config.loading import read_config_data
from emery.config.overrides import load_overridden
from emery.core.errors import ConfigError
from emery.core.events import SearchNotRun
from emery.core.hashing import content_hash
from emery.jobs.kinds import kind_of
from emery.jobs.manage import create_job_with_objects, find_resumable, spawn_job_process
from emery.store.protocol import Store
from emery.store.records import JobRecord


def discover_configs(folder: Path) -> dict[Path, dict[str, Any]]:
    """The job configs (``*.toml`` files with a ``[dataset]`` table) in ``folder``, each
    with its table as read."""
    found = {}
    for path in sorted(folder.glob("*.toml")):
        try:
            data = read_config_data(path)
        except ConfigError:
            continue
        if isinstance(data.get("dataset"), dict):
            found[path] = data
    return found


def choose_config(folder: Path) -> tuple[Path, dict[str, Any]]:
    """The one config in ``folder`` and its table; asks which one when there are several
    (only when a person can answer)."""
    found = discover_configs(folder)
    configs = list(found)
    if not configs:
        raise ConfigError(
            f"no CONFIG given and no job config (*.toml with a [dataset] table) in {folder}"
        )
    if len(configs) == 1:
        err.print(f"using {configs[0].name}")
        return configs[0], found[configs[0]]
    names = ", ".join(path.name for path in configs)
    if not interactive():
        raise ConfigError(f"several job configs here ({names}): name the one to train")
    for index, path in enumerate(configs, 1):
        err.print(f"  {index}. {path.name}")
    choice: int = typer.prompt("which config?", type=int, err=True)
    if not 1 <= choice <= len(configs):
        raise ConfigError(f"choose a number from 1 to {len(configs)}")
    return configs[choice - 1], found[configs[choice - 1]]


def _resumable(store: Store, config_hash: str, config_path: Path, fresh: bool) -> JobRecord | None:
    if fresh:
        return None
    job = find_resumable(store, config_hash)
    if job is None or job.config_path != str(config_path.resolve()):
        return None
    err.print(
        f"job {job.id} with this config is {job.state}"
        + (" (its run is gone)" if job.state == "running" else "")
    )
    if interactive() and not typer.confirm("resume it?", default=True, err=True):
        return None
    err.print(f"resuming {job.id} (start a new job instead with --new)")
    return job


def train(
    config_path: Annotated[
        Path | None,
        typer.Argument(
            metavar="[CONFIG]", help="Job config (.toml or .json); default: the one here."
        ),
    ] = None,
    stream_format: Annotated[
        str, typer.Option("--stream-format", help="cli (event lines), chart (live) or none.")
    ] = "cli",
    no_poll: Annotated[
        bool, typer.Option("--no-poll", help="Run in the background; print the job id.")
    ] = False,
    poll_timeout: Annotated[
        float | None,
        typer.Option(
            "--poll-timeout",
            min=0,
            help="Watch for at most this many seconds, then continue in the background.",
        ),
    ] = None,
    name: Annotated[str | None, typer.Option(help="Job name (default: job.name or file).")] = None,
    new: Annotated[
        bool, typer.Option("--new", help="Start a new job even if one can be resumed.")
    ] = False,
    job_type: Annotated[
        str | None,
        typer.Option(
            "--type",
            help="prompt (search the text), sft (fine-tune the model) or rl (GRPO on the"
            " verifier's reward).",
        ),
    ] = None,
    sets: SetOption = None,
    model: ModelOption = None,
    dataset: DatasetOption = None,
    env_file: EnvFileOption = None,
    as_json: JsonOption = False,
    quiet: QuietOption = False,
    server: ServerOption = None,
    idempotency_key: Annotated[
        str | None,
        typer.Option(
            "--idempotency-key",
            help="With --server: the job's key there (default: the config's; --new: a"
            " fresh one). The same key finds the same job.",
        ),
    ] = None,
    store_location: StoreOption = None,
) -> None:
    """Validate a job config, create the job and run it here with a progress display.

    Ctrl-C pauses the job cleanly; `emery jobs resume JOB` continues it. Running `emery
    train` again on the same config resumes a paused or interrupted job. With --json the
    progress still goes to stderr (stdout holds only the JSON document); --quiet hides it.
    With --server URL the job runs on that emery server: the config is checked here,
    sent, and its progress followed back; Ctrl-C pauses it there and the same command
    resumes it.
    """
    if stream_format not in ("cli", "chart", "none"):
        raise ConfigError(f"--stream-format must be cli, chart or none, not {stream_format!r}")
    stream: StreamFormat = "none" if quiet else stream_format  # type: ignore[assignment]
    overrides = command_line_overrides(sets, model, dataset, env_file)
    path, data = (config_path, None) if config_path is not None else choose_config(Path.cwd())
    config, given = load_overridden(path, overrides, job_type, data=data)
    if job_type is not None:  # stored with the config as written, as a --set would be
        given.setdefault("job", {})["type"] = config.job.type
    if server is not None:
        train_on_server(
            server,
            given,
            path,
            name=name,
            new=new,
            idempotency_key=idempotency_key,
            stream=stream,
            no_poll=no_poll,
            as_json=as_json,
        )
        return
    store = open_cli_store(store_location)
    job = _resumable(store, content_hash(config.model_dump(mode="json")), path, new)
    objects = None  # what the config resolved to, when this command creates the job
    if job is None:
        job, objects = create_job_with_objects(
            store, config, given=given, config_path=path, name=name
        )
        if not quiet:
            err.print(f"created job [bold]{job.id}[/bold] ({escape(job.name)}, {job.algorithm})")
    if no_poll:
        pid = spawn_job_process(store, job.id)
        if as_json:
            print_json({"job_id": job.id, "state": store.get_job(job.id).state, "pid": pid})
        else:
            out.print(job.id)
            where = f"pid {pid}" if pid is not None else f"in {store.get_job(job.id).owner}"
            err.print(f"running in the background ({where}); follow: emery jobs events {job.id} -f")
        return
    outcome = run_foreground(
        store, job.id, stream=stream, poll_timeout_s=poll_timeout, objects=objects
    )
    finish(store, outcome, as_json=as_json)


def finish(store: Store, outcome: ForegroundOutcome, *, as_json: bool) -> None:
    """Print how a foreground run ended, and exit non-zero when it did not succeed."""
    job = outcome.job
    kind = kind_of(job)
    if as_json:
        payload: dict[str, Any] = {"job_id": job.id, "state": job.state}
        payload |= {"stop_reason": job.stop_reason, "error": job.error}
        if outcome.job_pid is not None:
            payload["pid"] = outcome.job_pid
        result = kind.result(store, job)
        payload["result"] = None if result is None else result.model_dump(mode="json")
        print_json(payload)
    elif (report := kind.report(store, job)) is not None:
        out.print(escape(report), highlight=False, end="")
        for item in store.list_events(job.id, kinds=[SearchNotRun.kind], limit=1):
            never_ran = item.payload_as(SearchNotRun).message()
            err.print(
                f"[yellow]job {job.id} succeeded, but {escape(never_ran)}[/yellow]", soft_wrap=True
            )
    if outcome.job_pid is not None:
        if not as_json:
            err.print(
                f"job {job.id} continues in the background (pid {outcome.job_pid});"
                f" follow it: emery jobs events {job.id} --follow"
            )
        return
    if job.state == "paused":
        if not as_json:
            shown = job.stop_reason and not outcome.interrupted  # Ctrl-C needs no reason
            reason = f" ({job.stop_reason})" if shown else ""
            err.print(
                f"job {job.id} paused{escape(reason)}; resume it with: emery jobs resume {job.id}",
                soft_wrap=True,
            )
        raise typer.Exit(EXIT_INTERRUPTED if outcome.interrupted else 0)
    if job.state in ("failed", "cancelled"):
        if not as_json:
            detail = f": {job.error}" if job.error else ""
            err.print(f"[red]job {job.id} {job.state}[/red]{escape(detail)}", soft_wrap=True)
        raise typer.Exit(EXIT_FAILED)
