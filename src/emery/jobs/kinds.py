"""Job kinds: what a job is (prompt search, evaluation, SFT, RL), looked up by its kind.

A ``JobKind`` checks a config (``check``) and stores its job (``create``), makes the engine
that runs a stored job in this process (``engine``: a ``JobRun``) and says what a job reports
(``result``, ``report``). Every run has the same lifecycle (``ownership``: claim or take
over, heartbeat; ``control``: pause / resume / cancel; checkpoints; the end state), so the
CLI, the SDK and the server create, run, steer and show a job of any kind the same way.
What ``check`` resolved a config to goes to the run of the job made in the same process,
which does not resolve it again.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from emery.config.resolve import JobInputs, ResolvedJob
from emery.config.schema import JobConfig
from emery.core.errors import EmeryError
from emery.core.events import EventSink
from emery.evaluation.progress import ProgressSink
from emery.jobs.search_kind import EVAL, OPTIMIZE, search_kind_name
from emery.jobs.training_kinds import RL, SFT
from emery.reports.job_result import JobResult
from emery.store.protocol import Store
from emery.store.records import JobRecord
from emery.training.job import SFTResult


class JobRun(Protocol):
    """What every engine is: one process's run of a stored job, until it succeeds, fails,
    pauses or stops (``JobEngine`` for a prompt search or evaluation, ``TrainingEngine``
    for SFT and RL)."""

    async def run(self) -> JobRecord:
        """Claim the job, run it from its last checkpoint and store how it ended."""
        ...

    def request(self, action: str, reason: str | None = None) -> None:
        """Ask for ``"pause"`` or ``"cancel"`` (any thread, signal handlers too)."""
        ...

    @property
    def requested(self) -> str | None:
        """The first action asked for this run, if any."""
        ...


class JobKind(Protocol):
    """A kind of job: how its config is checked and stored, run, and reported."""

    @property
    def name(self) -> str:
        """The kind stored on its jobs (``JobRecord.kind``)."""
        ...

    def check(
        self,
        store: Store,
        config: JobConfig,
        *,
        config_path: Path | None = None,
        base_dir: Path | None = None,
        inputs: JobInputs | None = None,
    ) -> ResolvedJob | None:
        """Refuse, in one line, a config this kind cannot run; what it resolved the config
        to, for a run in this process (None: the run resolves it)."""
        ...

    def create(
        self,
        store: Store,
        config: JobConfig,
        objects: ResolvedJob | None,
        *,
        given: dict[str, Any] | None = None,
        config_path: Path | None = None,
        base_dir: Path | None = None,
        name: str | None = None,
        metadata: dict[str, Any] | None = None,
        inputs: JobInputs | None = None,
    ) -> JobRecord:
        """Store a new job for ``config``, which ``check`` passed and resolved to
        ``objects``."""
        ...

    def engine(
        self,
        store: Store,
        job_id: str,
        *,
        inputs: JobInputs | None = None,
        on_event: EventSink | None = None,
        on_note: Callable[[str], None] | None = None,
        on_progress: ProgressSink | None = None,
        objects: ResolvedJob | None = None,
    ) -> JobRun:
        """The engine that runs job ``job_id`` in this process (``objects``: from ``check``,
        in this process, for the job it created)."""
        ...

    def report(self, store: Store, job: JobRecord) -> str | None:
        """The finished job's report in words (None before it succeeds)."""
        ...

    def result(self, store: Store, job: JobRecord) -> JobResult | SFTResult | None:
        """The job's result: final once it succeeded; before, what it has so far, or None
        for a kind that has nothing to show until it ends."""
        ...


KINDS: dict[str, JobKind] = {kind.name: kind for kind in (OPTIMIZE, EVAL, SFT, RL)}
"""Every job kind by the name its jobs store."""


def kind_named(name: str) -> JobKind:
    """The kind called ``name``; an unknown one (a job from a newer emery) is refused."""
    kind = KINDS.get(name)
    if kind is None:
        raise EmeryError(f"unknown job kind {name!r}: choose from {', '.join(KINDS)}")
    return kind


def kind_of(job: JobRecord) -> JobKind:
    """The kind of a stored job."""
    return kind_named(job.kind)


def kind_for(config: JobConfig) -> JobKind:
    """The kind of job ``config`` makes: its ``[job] type``, a prompt job's by its
    algorithm (``optimize`` or ``eval``)."""
    if config.job.type == "prompt":
        return kind_named(search_kind_name(config.job.algorithm))
    return kind_named(config.job.type)
