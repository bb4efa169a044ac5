"""Run a job's best (or any) candidate on new input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from emery.config.loading import job_config
from emery.config.resolve import JobInputs, open_cache, resolve_job, resolve_lm
from emery.core.errors import EmeryError
from emery.core.models import Candidate, Example
from emery.store.protocol import Store
from emery.systems.base import RunContext, System


def chosen_candidate(store: Store, job_id: str, candidate: Candidate | str | None) -> Candidate:
    """``candidate`` (a candidate or an id of the job), else the job's best; EmeryError when
    the job has none yet."""
    if isinstance(candidate, Candidate):
        return candidate
    if candidate is not None:
        return store.get_candidate(job_id, candidate)
    job = store.get_job(job_id)
    if not job.best_candidate_id:
        raise EmeryError(f"job {job_id} has no best candidate yet")
    return store.get_candidate(job_id, job.best_candidate_id)


def job_system(store: Store, job_id: str, objects: JobInputs | None = None) -> System:
    """The system a job optimizes: the object it was given, else the one its config builds."""
    if objects is not None and objects.system is not None:
        return objects.system
    job = store.get_job(job_id)
    if "system" in job.metadata.get("in_process_inputs", ()):
        raise EmeryError(
            f"job {job_id} was given its system as a Python object: pass it again"
            " (emery.Job(store, job_id, inputs=JobInputs(system=...)))"
        )
    return resolve_job(job_config(job), Path(job.base_dir or ".")).system


async def run_inference(
    store: Store,
    job_id: str,
    inputs: dict[str, Any],
    *,
    candidate: Candidate | str | None = None,
    objects: JobInputs | None = None,
) -> Any:
    """The output of the job's system under ``candidate`` (default: the job's best) for
    ``inputs``. Raises EmeryError when the run fails."""
    job = store.get_job(job_id)
    config = job_config(job)
    objects = objects or JobInputs()
    candidate = chosen_candidate(store, job_id, candidate)
    system = job_system(store, job_id, objects)
    cache = open_cache(config, Path(job.base_dir or "."))
    try:
        given = objects.lms.get("task") if objects.lms else None
        lm = resolve_lm(config.lm.task, cache=cache, base=given)
        example = Example(id="inference", input=dict(inputs))
        run = await system.run(candidate, RunContext(lm=lm, example=example))
    finally:
        if cache is not None:
            cache.close()
    if run.error is not None:
        raise EmeryError(f"inference failed: {run.error}")
    return run.output
