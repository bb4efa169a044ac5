"""Prompt search and evaluation as job kinds: a ``[job] type = "prompt"`` config, run by
the search engine (``JobEngine``).

The kind is ``optimize`` for a search and ``eval`` for the baseline (scoring only). A
config is checked before its job is stored (``check``: its algorithm settings, its
system against its data, the gold outputs and the reference candidates), and what it
resolved to can go to the run in the same process instead of being resolved again.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from emery.algorithms.registry import algorithm_spec, checked_settings
from emery.config.resolve import JobInputs, ResolvedJob, resolve_job
from emery.config.schema import JobConfig
from emery.core.events import EventSink
from emery.core.hashing import content_hash
from emery.evaluation.progress import ProgressSink
from emery.integrations.tracking import check_tracking
from emery.jobs.engine import JobEngine
from emery.jobs.warm_start import check_warm_start, pinned, system_kind
from emery.reports.job_result import JobResult, build_result
from emery.reports.report import render_report
from emery.store.protocol import Store
from emery.store.records import JobRecord, NewJob
from emery.training.paths import job_base_dir
from emery.workers.executors import executor_kind


def new_job_id() -> str:
    """A short random job id such as ``j-3f9a2c71b0``."""
    return f"j-{uuid.uuid4().hex[:10]}"


def search_kind_name(algorithm: str) -> str:
    """``eval`` for the baseline (scoring only), ``optimize`` for a search."""
    return "eval" if algorithm == "baseline" else "optimize"


@dataclass(frozen=True)
class SearchKind:
    """A job kind the search engine runs: ``optimize`` or ``eval``."""

    name: str

    def check(
        self,
        store: Store,
        config: JobConfig,
        *,
        config_path: Path | None = None,
        base_dir: Path | None = None,
        inputs: JobInputs | None = None,
    ) -> ResolvedJob:
        """Refuse a config a search cannot run (its tracking, executor and algorithm
        settings and the strategies they name, its system against its data, the gold
        outputs, the references, the earlier job a warm start names); the objects it
        resolved to (``inputs``: objects of this process in place of some)."""
        check_tracking(config.tracking)
        executor_kind(config.runtime.executor)
        settings = checked_settings(config.job.algorithm, config.algorithm)
        # built once here so the strategies it names as module:attr import before the job
        # is stored (a GEPA acceptance rule, say)
        algorithm = algorithm_spec(config.job.algorithm).factory(settings)
        folder = job_base_dir(config_path, base_dir)
        objects = resolve_job(config, folder, inputs).checked()
        if config.job.warm_start is not None:
            check_warm_start(store, config, objects.system, algorithm)
        return objects

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
        """Store a new job of this kind for ``config``, which ``check`` resolved to
        ``objects``."""
        assert objects is not None, "a prompt job's config is checked first"
        inputs = inputs or JobInputs()
        base_dir = job_base_dir(config_path, base_dir)
        system = objects.system
        resolved = config.model_dump(mode="json")
        system_config = resolved.get("system")
        system_id = store.register_system(
            name=system.name,
            kind=system_kind(config, system),
            version=system.version(),
            config=system_config,
        )
        meta = dict(metadata or {})
        in_process = [
            field
            for field in ("system", "dataset", "verifier", "lms")
            if getattr(inputs, field) is not None and field not in meta.get("serialized_inputs", ())
        ]
        if in_process:
            meta["in_process_inputs"] = in_process
        job_name = name or config.job.name or (config_path.stem if config_path else system.name)
        return store.create_job(
            NewJob(
                id=new_job_id(),
                name=job_name,
                kind=self.name,
                algorithm=config.job.algorithm,
                system_name=system.name,
                system_id=system_id,
                config=given if given is not None else resolved,
                resolved_config=pinned(store, config).model_dump(mode="json"),
                config_hash=content_hash(resolved),
                config_path=str(config_path.resolve()) if config_path else None,
                base_dir=str(base_dir),
                metadata=meta,
            )
        )

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
    ) -> JobEngine:
        """The engine that runs job ``job_id`` in this process (``objects``: what ``check``
        resolved its config to in this process, used instead of resolving it again)."""
        return JobEngine(
            store,
            job_id,
            inputs=inputs,
            on_event=on_event,
            on_note=on_note,
            on_progress=on_progress,
            objects=objects,
        )

    def result(self, store: Store, job: JobRecord) -> JobResult:
        """The job's result: its stored one once it succeeded, else the search so far."""
        if job.state == "succeeded" and job.result:
            return JobResult.model_validate(job.result)
        return build_result(store, job)

    def report(self, store: Store, job: JobRecord) -> str | None:
        """The finished job's report in words (None before it succeeds)."""
        if job.state != "succeeded" or not job.result:
            return None
        return render_report(JobResult.model_validate(job.result))


OPTIMIZE = SearchKind("optimize")
EVAL = SearchKind("eval")
