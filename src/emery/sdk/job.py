"""The Python SDK: ``emery.Job`` and ``emery.optimize``.

Blocking calls never touch the caller's event loop: a job runs on its own loop in a thread
of its own, so the SDK works the same in scripts, notebooks and async applications.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, overload

from emery.config.env_file import load_env_file
from emery.config.loading import load_config, parse_config
from emery.config.resolve import JobInputs
from emery.config.schema import JobConfig
from emery.core.aio import run_sync
from emery.core.errors import EmeryError
from emery.core.events import Event
from emery.core.models import Candidate
from emery.evaluation.progress import ProgressSink
from emery.jobs import manage
from emery.jobs.kinds import JobRun, kind_of
from emery.jobs.ownership import is_stale
from emery.lm.base import LM
from emery.reports.graph_results import run_verifier
from emery.reports.inference import run_inference
from emery.reports.job_result import JobResult
from emery.sdk.arguments import (
    BudgetArg,
    DatasetArg,
    LMArg,
    SystemArg,
    VerifierArg,
    optimize_config,
    verifier_object,
)
from emery.sdk.progress_text import TextReporter
from emery.sdk.remote_job import RemoteJob, refuse_objects
from emery.store.backends import open_store
from emery.store.protocol import Store
from emery.store.records import JobRecord
from emery.systems.base import System
from emery.training.job import SFTResult
from emery.verifiers.agreement import GraphVerdict
from emery.verifiers.base import Verifier

ACTIVE = ("created", "queued", "running")

EnvFileArg = str | Path | bool
"""``True``: read ``./.env`` when there is one; a path: that file (it must exist), after
``./.env``, whose values it replaces; ``False``: read none. A variable already set in the
environment is never replaced."""


def read_env_file(env_file: EnvFileArg) -> None:
    """Add the ``.env`` file's variables to the environment (see ``EnvFileArg``)."""
    if env_file is False:
        return
    load_env_file()
    if env_file is not True:
        load_env_file(Path(env_file), option="env_file=")


class Job:
    """A stored job: start it, watch it, steer it and read its result."""

    def __init__(self, store: Store, job_id: str, *, inputs: JobInputs | None = None) -> None:
        self.store = store
        self.id = job_id
        self.inputs = inputs or JobInputs()
        self._thread: threading.Thread | None = None
        self._engine: JobRun | None = None
        self._error: BaseException | None = None

    # --- creating and finding jobs ----------------------------------------------------

    @overload
    @classmethod
    def create(
        cls,
        config: JobConfig | Mapping[str, Any] | str | Path,
        *,
        store: Store | str | None = None,
        name: str | None = None,
        base_dir: str | Path | None = None,
        system: System | None = None,
        verifier: Verifier | Callable[..., Any] | None = None,
        lms: Mapping[str, LM] | None = None,
        env_file: EnvFileArg = True,
        server: None = None,
    ) -> Job: ...

    @overload
    @classmethod
    def create(
        cls,
        config: JobConfig | Mapping[str, Any] | str | Path,
        *,
        name: str | None = None,
        env_file: EnvFileArg = True,
        server: str,
    ) -> RemoteJob: ...

    @classmethod
    def create(
        cls,
        config: JobConfig | Mapping[str, Any] | str | Path,
        *,
        store: Store | str | None = None,
        name: str | None = None,
        base_dir: str | Path | None = None,
        system: System | None = None,
        verifier: Verifier | Callable[..., Any] | None = None,
        lms: Mapping[str, LM] | None = None,
        env_file: EnvFileArg = True,
        server: str | None = None,
    ) -> Job | RemoteJob:
        """Validate ``config`` (a JobConfig, a dict, or a TOML/JSON file) and store the job.

        ``system``, ``verifier`` and ``lms`` (by role) replace what the config names with
        objects of this process; such a job can only be resumed from Python. ``verifier``
        may be a metric function, ``metric(example, output)`` or DSPy's
        ``metric(example, pred, trace=None)`` (``emery.verifiers.function``). ``env_file``:
        ``./.env`` is read into the environment first (API keys; variables already set
        win); a path reads that file too, ``False`` none. ``server``: the job is made and
        run by the ``emery server`` at that URL (its API key from ``$EMERY_API_KEY``), and
        a ``RemoteJob`` comes back; the config alone goes, no objects.
        """
        read_env_file(env_file)
        if server is not None:
            refuse_objects(
                store=store, base_dir=base_dir, system=system, verifier=verifier, lms=lms
            )
            return RemoteJob.create(config, server=server, name=name)
        opened = store if store is not None and not isinstance(store, str) else open_store(store)
        config_path: Path | None = None
        given: dict[str, Any] | None = None
        if isinstance(config, str | Path):
            config_path = Path(config)
            parsed = load_config(config_path)
        elif isinstance(config, JobConfig):
            parsed = config
        else:
            given = dict(config)
            parsed = parse_config(given, "Job.create")
        inputs = JobInputs(
            system=system,
            verifier=verifier_object(verifier) if verifier is not None else None,
            lms=lms,
        )
        record = manage.create_job(
            opened,
            parsed,
            given=given,
            config_path=config_path,
            base_dir=Path(base_dir) if base_dir is not None else None,
            name=name,
            inputs=inputs,
        )
        return cls(opened, record.id, inputs=inputs)

    @classmethod
    def get(
        cls, job_id: str, *, store: Store | str | None = None, env_file: EnvFileArg = True
    ) -> Job:
        """A stored job by id, id prefix or name (``env_file`` as in ``create``: a job
        resumed from here finds its API keys)."""
        read_env_file(env_file)
        opened = store if store is not None and not isinstance(store, str) else open_store(store)
        return cls(opened, opened.resolve_job_id(job_id))

    # --- running ----------------------------------------------------------------------

    def start(self, *, wait: bool = False, on_progress: ProgressSink | None = None) -> Job:
        """Run the job in a thread of its own in this process (``wait``: block until it stops);
        ``on_progress`` hears each rollout of an evaluation batch as it finishes."""
        if self._thread is not None and self._thread.is_alive():
            raise EmeryError(f"job {self.id} is already running in this process")
        self._error = None
        kind = kind_of(self.record())
        self._engine = kind.engine(self.store, self.id, inputs=self.inputs, on_progress=on_progress)
        engine = self._engine

        def work() -> None:
            try:
                run_sync(engine.run())
            except BaseException as exc:  # reported by wait()/stream_until_complete()
                self._error = exc

        self._thread = threading.Thread(target=work, name=f"emery-job-{self.id}", daemon=True)
        self._thread.start()
        if wait:
            self.wait()
        return self

    def wait(self, timeout: float | None = None) -> JobRecord:
        """Block until the job stops running in this process (or ``timeout`` passes)."""
        if self._thread is not None:
            self._thread.join(timeout)
            if self._error is not None and not self._thread.is_alive():
                error, self._error = self._error, None
                raise error
        return self.record()

    def record(self) -> JobRecord:
        return self.store.get_job(self.id)

    def status(self) -> str:
        """created, queued, running, paused, succeeded, failed or cancelled."""
        return self.record().state

    def events(self, since: int = 0) -> list[Event]:
        """Stored events after sequence number ``since``."""
        return self.store.list_events(self.id, since=since)

    def stream(self, since: int = 0, *, timeout: float | None = None) -> Iterator[Event]:
        """Events as they are stored, until the job stops running."""
        return manage.follow_events(self.store, self.id, since=since, timeout_s=timeout)

    def stream_until_complete(
        self,
        on_event: Callable[[Event], None] | None = None,
        *,
        timeout: float | None = None,
        since: int = 0,
        on_progress: ProgressSink | None = None,
    ) -> JobRecord:
        """Start the job if it has not started, pass each event to ``on_event`` (and, when
        this call starts it, each batch's progress to ``on_progress``) until the job stops
        (succeeds, fails, pauses or is cancelled), and return its record."""
        job = self.record()
        idle = self._thread is None or not self._thread.is_alive()
        if idle and (job.state in ("created", "queued", "paused") or is_stale(job)):
            self.start(on_progress=on_progress)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            thread = self._thread
            alive = thread is not None and thread.is_alive()
            items = self.store.list_events(self.id, since=since)
            for item in items:
                since = item.seq or since
                if on_event is not None:
                    on_event(item)
            # The job record matters only once this process no longer runs the job.
            finished = False
            if not alive:
                job = self.record()
                finished = job.state not in ACTIVE or is_stale(job)
            if finished or (deadline is not None and time.monotonic() >= deadline):
                break
            if not items:
                if alive and thread is not None:
                    thread.join(0.1)  # returns at once when the job ends
                else:
                    time.sleep(0.1)
        remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
        return self.wait(remaining)

    def pause(self, *, wait: float | None = 30.0) -> JobRecord:
        """Pause the job (from this or any other process); ``resume`` continues it."""
        return manage.pause_job(self.store, self.id, wait_s=wait)

    def resume(self, *, wait: bool = False, **objects: Any) -> Job:
        """Continue a paused or crashed job from its last checkpoint, in this process.

        Pass ``system=``, ``verifier=`` or ``lms=`` again for a job created with objects.
        """
        for name, value in objects.items():
            if name not in ("system", "dataset", "verifier", "lms"):
                raise EmeryError(f"resume() got an unexpected argument {name!r}")
            if name == "verifier" and value is not None:
                value = verifier_object(value)
            setattr(self.inputs, name, value)
        return self.start(wait=wait)

    def cancel(self, *, wait: float | None = 30.0) -> JobRecord:
        """Cancel the job; everything it stored stays."""
        return manage.cancel_job(self.store, self.id, wait_s=wait)

    # --- results ----------------------------------------------------------------------

    def result(self) -> JobResult | SFTResult | None:
        """The result: a prompt job's final one when it succeeded, else the search so far;
        an SFT or RL job's tuned model and test scores (``SFTResult``, ``RLResult``) once it
        succeeded, None before."""
        job = self.record()
        return kind_of(job).result(self.store, job)

    def best_candidate(self) -> Candidate:
        """The best candidate found so far (by val score)."""
        job = self.record()
        if not job.best_candidate_id:
            raise EmeryError(f"job {self.id} has no scored candidate yet")
        return self.store.get_candidate(self.id, job.best_candidate_id)

    def run_inference(self, input: Mapping[str, Any], *, candidate: str | None = None) -> Any:
        """Run the best candidate (or ``candidate``) on one input; returns the output."""
        return run_sync(
            run_inference(
                self.store, self.id, dict(input), candidate=candidate, objects=self.inputs
            )
        )

    def run_verifier(
        self, trace: Mapping[str, Any], *, candidate: str | None = None
    ) -> GraphVerdict:
        """Score ``trace`` (input, output, transcript, ...) with the best candidate (or
        ``candidate``) of this job's verifier graph; returns the structured reward."""
        return run_sync(
            run_verifier(self.store, self.id, trace, candidate=candidate, objects=self.inputs)
        )

    def __repr__(self) -> str:
        return f"Job({self.id!r}, state={self.status()!r})"


def optimize(
    system: SystemArg,
    dataset: DatasetArg,
    *,
    algorithm: str = "gepa",
    budget: BudgetArg = None,
    verifier: VerifierArg = None,
    lm: LMArg = None,
    reflection_lm: LMArg = None,
    seed: int = 0,
    settings: Mapping[str, Any] | None = None,
    runtime: Mapping[str, Any] | None = None,
    name: str | None = None,
    store: Store | str | None = None,
    on_event: Callable[[Event], None] | None = None,
    progress: bool = True,
    tracking: Mapping[str, Any] | None = None,
    warm_start: str | None = None,
    env_file: EnvFileArg = True,
) -> JobResult:
    """Optimize ``system`` on ``dataset`` in one call and return the result.

    ``system``: a PromptProgram (or its config / a ``[system]`` dict), any ``System``
    object, or None: a built-in task's own program, or for a data file (or ``Dataset``) a
    one-node graph built from it. ``dataset``: a built-in task name,
    a data file, a ``Dataset`` or a list of Examples. ``budget``: metric calls (an int) or
    ``[job.budget]`` settings. ``verifier``: a verifier kind (``"numeric"``), a
    ``[verifier]`` dict, a Verifier, or a metric function, ``metric(example, output)`` or
    DSPy's ``metric(example, pred, trace=None)``, sync or async, returning a score in
    [0, 1], a bool, ``(score, feedback)`` or an object with ``.score`` and ``.feedback``
    (``emery.verifiers.function`` says what ``example`` holds). ``lm`` /
    ``reflection_lm``: a model spec such as ``"local/qwen2.5-coder-0.5b"``, an LMConfig (or
    its dict), an LM object, or an ``openai.OpenAI`` / ``openai.AsyncOpenAI`` client with its
    model, ``{"client": client, "model": "gpt-4.1-mini"}`` (its base URL is stored with the
    job, its API key never). ``settings`` are the algorithm's ``[algorithm.<name>]``
    settings. ``progress``: print each event and, every few seconds, the running batch's
    progress to stderr (``on_event`` hears events too).
    ``tracking``: the ``[tracking]`` settings, e.g. ``{"mlflow": True}``. ``warm_start``:
    an earlier job on the same system (id or name) whose candidates start the search,
    rescored on this val (``[job] warm_start``). ``env_file``: ``./.env`` is read into the
    environment first (API keys; variables already set win); a path reads that file too,
    ``False`` none.
    """
    read_env_file(env_file)
    opened = store if store is not None and not isinstance(store, str) else open_store(store)
    workdir = Path((runtime or {}).get("workdir", ".emery"))
    config, given, inputs = optimize_config(
        system=system,
        dataset=dataset,
        algorithm=algorithm,
        budget=budget,
        verifier=verifier,
        lm=lm,
        reflection_lm=reflection_lm,
        seed=seed,
        settings=settings,
        runtime=runtime,
        name=name,
        workdir=workdir,
        tracking=tracking,
        warm_start=warm_start,
    )
    record = manage.create_job(opened, config, given=given, name=name, inputs=inputs)
    job = Job(opened, record.id, inputs=inputs)
    reporter = TextReporter() if progress else None
    final = job.stream_until_complete(
        _both(reporter.event if reporter else None, on_event),
        on_progress=reporter.progress if reporter else None,
    )
    if final.state == "failed":
        raise EmeryError(f"job {final.id} failed: {final.error}")
    result = job.result()
    if not isinstance(result, JobResult):  # a prompt job's result is one
        raise EmeryError(f"job {final.id} is a {final.kind} job, not a prompt search")
    return result


def _both(
    first: Callable[[Event], None] | None, second: Callable[[Event], None] | None
) -> Callable[[Event], None] | None:
    """One event sink calling both (either may be None)."""
    if first is None or second is None:
        return first or second

    def both(item: Event) -> None:
        first(item)
        second(item)

    return both
