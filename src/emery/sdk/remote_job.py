"""A job on a running ``emery server``, from Python: ``emery.Job.create(config,
server=URL)`` returns one. Its config is checked here, the job made and run by the
server; events, pause, resume, cancel and the result go over HTTP (``ServerClient``)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from emery.config.loading import parse_config, read_config_data
from emery.config.schema import JobConfig
from emery.core.errors import EmeryError
from emery.core.events import Event
from emery.reports.job_result import JobResult
from emery.sdk.server_client import ServerClient

FINISHED = ("succeeded", "failed", "cancelled", "paused")


class RemoteJob:
    """A job the server at ``client.url`` runs: watch it, steer it, read its result."""

    def __init__(self, client: ServerClient, job_id: str) -> None:
        self.client = client
        self.id = job_id

    @classmethod
    def create(
        cls,
        config: JobConfig | Mapping[str, Any] | str | Path,
        *,
        server: str,
        name: str | None = None,
        api_key: str | None = None,
        idempotency_key: str | None = None,
    ) -> RemoteJob:
        """Check ``config`` here, then have the server make and start the job.
        ``idempotency_key`` (default: a fresh one) makes a retried call find the job the
        first one made."""
        given = sendable(config)
        parse_config(given, "Job.create")  # a bad config fails here, before any request
        client = ServerClient(server, api_key=api_key)
        job, _ = client.create_job(
            given, name=name, idempotency_key=idempotency_key or uuid.uuid4().hex
        )
        return cls(client, str(job["id"]))

    def record(self) -> dict[str, Any]:
        """The job as the server shows it (state, scores, config and result)."""
        return self.client.job(self.id)

    def status(self) -> str:
        return str(self.record()["state"])

    def stream(self, since: int = 0) -> Iterator[Event]:
        """Events as the server stores them, until the job stops running."""
        return self.client.events(self.id, since=since)

    def stream_until_complete(
        self, on_event: Callable[[Event], None] | None = None, *, since: int = 0
    ) -> dict[str, Any]:
        """Pass each event to ``on_event`` until the job stops (succeeds, fails, pauses or
        is cancelled); returns its record."""
        for item in self.stream(since):
            if on_event is not None:
                on_event(item)
        return self.record()

    def pause(self, *, wait: float = 30.0) -> dict[str, Any]:
        return self.client.pause(self.id, wait_s=wait)

    def resume(self) -> RemoteJob:
        self.client.resume(self.id)
        return self

    def cancel(self, *, wait: float = 30.0) -> dict[str, Any]:
        return self.client.cancel(self.id, wait_s=wait)

    def result(self) -> JobResult | dict[str, Any] | None:
        """A prompt job's result (``JobResult``); an SFT or RL job's as the server's JSON;
        None before there is one."""
        result = self.record().get("result")
        if not result:
            return None
        try:
            return JobResult.model_validate(result)
        except ValueError:
            return dict(result)

    def __repr__(self) -> str:
        return f"RemoteJob({self.id!r}, server={self.client.url!r})"


def sendable(config: JobConfig | Mapping[str, Any] | str | Path) -> dict[str, Any]:
    """``config`` as the JSON the server takes: a file's tables (its relative dataset path
    made absolute, as it would be read here), a dict as given, a JobConfig dumped."""
    if isinstance(config, JobConfig):
        return config.model_dump(mode="json", exclude_none=True)
    if not isinstance(config, str | Path):
        return dict(config)
    path = Path(config)
    return absolute_dataset_path(read_config_data(path), path.resolve().parent)


def absolute_dataset_path(config: dict[str, Any], folder: Path) -> dict[str, Any]:
    """``config`` with a relative ``dataset.path`` made absolute from ``folder`` (the
    config's), as it is read here: a server on this machine then finds the file."""
    dataset = config.get("dataset")
    if not isinstance(dataset, dict):
        return config
    path = dataset.get("path")
    if not isinstance(path, str) or Path(path).is_absolute():
        return config
    return {**config, "dataset": {**dataset, "path": str((folder / path).resolve())}}


def refuse_objects(**objects: Any) -> None:
    """A job on a server is made from its config alone: objects of this process cannot go."""
    given = [name for name, value in objects.items() if value is not None]
    if given:
        raise EmeryError(
            f"Job.create(server=...) takes a config only, not {', '.join(given)}: objects of"
            " this process cannot run on the server (name them in the config instead)"
        )
