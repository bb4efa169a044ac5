"""One job's MLflow run: opened (or reopened on resume), fed metrics from a background
thread, given its artifacts and its final status. MLflow is imported only here, and only
when a job tracks (``[tracking] mlflow = true``, the ``emery[mlflow]`` extra)."""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import queue
import re
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from emery.core.errors import ConfigError

log = logging.getLogger(__name__)

EXTRA_HINT = "pip install 'emery[mlflow]'"
DEFAULT_EXPERIMENT = "emery"
PARAM_CHARS = 500
"""Longest parameter value logged (whole texts are in the ``config.json`` artifact)."""


def check_mlflow() -> None:
    """A one-line ConfigError when MLflow is not installed."""
    if importlib.util.find_spec("mlflow") is None:
        raise ConfigError(
            f"[tracking] mlflow = true needs MLflow, which is not installed: {EXTRA_HINT}"
        )


def tracking_uri(given: str | None, base_dir: Path) -> str | None:
    """The URI to log to: a URL or database URI as given, a folder (``mlruns``) as a
    ``file:`` URI relative to ``base_dir``; None: MLflow's default."""
    if given is None:
        return None
    scheme = urlparse(given).scheme
    if len(scheme) > 1 and scheme != "file":
        return given
    path = Path(given.removeprefix("file://") if scheme == "file" else given)
    return (base_dir / path).resolve().as_uri()


def _param_key(key: str) -> str:
    """A config path as an MLflow parameter name (only ``[/\\w.\\- :]`` allowed)."""
    return re.sub(r"[^/\w.\- :]", "_", key)[:250]


def flat_params(data: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, str]]:
    """The config as ``section.key`` parameters; lists as JSON, long values cut."""
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            yield from flat_params(value, f"{name}.")
            continue
        text = value if isinstance(value, str) else json.dumps(value)
        if len(text) > PARAM_CHARS:
            text = text[: PARAM_CHARS - 1] + "…"
        yield _param_key(name), text


@dataclass(frozen=True)
class MetricPoint:
    key: str
    value: float
    step: int
    timestamp_ms: int


class MlflowRun:
    """A run on an MLflow tracking store. Metrics are sent by a background thread in
    batches (``log``), so a slow tracking server never holds up the search; artifacts and
    the status are written by ``close`` once the queue is drained."""

    def __init__(self, client: Any, run_id: str, *, created: bool) -> None:
        self.client = client
        self.run_id = run_id
        self.created = created
        self._queue: queue.SimpleQueue[MetricPoint | None] = queue.SimpleQueue()
        self._failed = False
        self._thread = threading.Thread(
            target=self._send_loop, name=f"mlflow-{run_id[:8]}", daemon=True
        )
        self._thread.start()

    @classmethod
    def open(
        cls,
        uri: str | None,
        experiment: str,
        *,
        run_id: str | None,
        run_name: str,
        tags: Mapping[str, str],
    ) -> MlflowRun:
        """Reopen ``run_id`` (a resumed job) or start a new run in ``experiment``."""
        if uri is not None and uri.startswith("file:"):
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 asks
        # a server's run URL would go to stdout, which the CLI keeps for results (--json)
        os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")
        from mlflow.tracking import MlflowClient

        client = MlflowClient(tracking_uri=uri)
        if run_id is not None:
            client.update_run(run_id, status="RUNNING")
            return cls(client, run_id, created=False)
        found = client.get_experiment_by_name(experiment)
        experiment_id = found.experiment_id if found else _create_experiment(client, experiment)
        run = client.create_run(experiment_id, run_name=run_name, tags=dict(tags))
        return cls(client, run.info.run_id, created=True)

    # -- metrics, from the job's events --------------------------------------------------

    def log(self, point: MetricPoint) -> None:
        self._queue.put(point)

    def _send_loop(self) -> None:
        done = False
        while not done:
            batch = [self._queue.get()]
            while len(batch) < 1000:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            done = None in batch
            self._send([point for point in batch if point is not None])

    def _send(self, points: list[MetricPoint]) -> None:
        if not points:
            return
        from mlflow.entities import Metric

        metrics = [Metric(p.key, p.value, p.timestamp_ms, p.step) for p in points]
        try:
            self.client.log_batch(self.run_id, metrics=metrics)
        except Exception as exc:  # tracking never breaks a job
            if not self._failed:
                log.warning("MLflow run %s: metrics not logged: %s", self.run_id, exc)
            self._failed = True

    # -- params, artifacts, status -------------------------------------------------------

    def log_params(self, config: Mapping[str, Any]) -> None:
        """The config as parameters (a new run only: MLflow parameters never change)."""
        from mlflow.entities import Param

        params = [Param(key, value) for key, value in flat_params(config)]
        for start in range(0, len(params), 100):
            self.client.log_batch(self.run_id, params=params[start : start + 100])

    def flush(self, timeout_s: float = 60.0) -> None:
        """Send every metric logged so far; stops the sending thread."""
        self._queue.put(None)
        self._thread.join(timeout_s)

    def log_artifacts(self, folder: Path, artifact_path: str | None = None) -> None:
        self.client.log_artifacts(self.run_id, str(folder), artifact_path)

    def set_tag(self, key: str, value: str) -> None:
        self.client.set_tag(self.run_id, key, value)

    def set_status(self, status: str, *, terminated: bool) -> None:
        """``FINISHED``, ``FAILED`` or ``KILLED`` end the run; others only mark it."""
        if terminated:
            self.client.set_terminated(self.run_id, status=status)
        else:
            self.client.update_run(self.run_id, status=status)


def _create_experiment(client: Any, name: str) -> str:
    """The id of a new experiment ``name`` (or of one another process just made)."""
    try:
        return str(client.create_experiment(name))
    except Exception:
        found = client.get_experiment_by_name(name)
        if found is None:
            raise
        return str(found.experiment_id)
