"""The prompt a training job takes from an earlier prompt job (``[sft]`` / ``[rl]``
``source_job``): that job's best candidate, checked against the training job's system.

``source_prompt`` (and ``check_source_job``, as a training job is created) refuses, in
one line naming the setting, a job the store does not hold, a training job (an sft or rl
job has no prompt to hand on), a prompt job with no best candidate yet, and a job that
optimized another system (another ``[system] kind``, or other component names in its
seed), so that a tuned model is never scored with a prompt written for something else (a
missing component would silently fall back to the seed's instruction). ``pin_source_job``
resolves a job name to its id as the job is stored: a name names the newest job of that
name, which a later prompt job of the same name would change under a resumed training
job.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from emery.config.resolve import resolve_job
from emery.config.schema import JobConfig, RLSection, SFTSection
from emery.core.errors import ConfigError, EmeryError
from emery.core.models import Candidate
from emery.store.protocol import Store
from emery.store.records import JobRecord

TRAINING_KINDS = ("sft", "rl")
"""The job kinds that tune weights: their jobs have no best prompt to hand on."""


def _section(config: JobConfig) -> tuple[str, SFTSection | RLSection] | None:
    """The ``[sft]`` or ``[rl]`` section of ``config`` with its name, if any."""
    if config.sft is not None:
        return "sft", config.sft
    if config.rl is not None:
        return "rl", config.rl
    return None


def source_job_id(store: Store, config: JobConfig) -> str | None:
    """The id of the job ``source_job`` names (id, id prefix or name); None without one."""
    named = _section(config)
    name = None if named is None else named[1].source_job
    if named is None or name is None:
        return None
    try:
        return store.resolve_job_id(name)
    except EmeryError as exc:
        raise ConfigError(f"{named[0]}.source_job: {exc}") from None


def pin_source_job(store: Store, config: JobConfig) -> JobConfig:
    """``config`` with its ``source_job`` resolved to a job id (see the module doc)."""
    job_id = source_job_id(store, config)
    named = _section(config)
    if job_id is None or named is None:
        return config
    key, section = named
    return config.model_copy(update={key: section.model_copy(update={"source_job": job_id})})


def check_source_job(store: Store, config: JobConfig, base_dir: Path) -> None:
    """Refuse, in one line, a ``source_job`` this training job cannot take (see the
    module doc), before the job is stored."""
    if source_job_id(store, config) is None:
        return
    system = resolve_job(config, base_dir).system
    source_prompt(store, config, system.seed_candidate())


def source_prompt(store: Store, config: JobConfig, seed: Candidate) -> Candidate | None:
    """The best candidate of ``config``'s ``source_job`` for a system whose seed is
    ``seed``; None when the config names no source job. Refusals: see the module doc."""
    job_id = source_job_id(store, config)
    if job_id is None:
        return None
    key = "sft.source_job" if config.sft is not None else "rl.source_job"
    source = store.get_job(job_id)
    if source.kind in TRAINING_KINDS:
        raise ConfigError(
            f"{key}: job {source.id} is an {source.kind} job; only a prompt search's best"
            " prompt can be trained (name the prompt job it started from)"
        )
    if not source.best_candidate_id:
        raise ConfigError(
            f"{key}: job {source.id} has no best candidate (it is {source.state}):"
            " name a finished prompt job"
        )
    _check_same_system(key, store, source, config, seed)
    return store.get_candidate(source.id, source.best_candidate_id)


def _check_same_system(
    key: str, store: Store, source: JobRecord, config: JobConfig, seed: Candidate
) -> None:
    """The source job optimized a system of the same kind (where both configs state one)
    whose seed has the same component names as ``seed``."""
    before = _stated_kind(source.resolved_config or source.config)
    now = _stated_kind(config.model_dump(mode="json"))
    if before is not None and now is not None and before != now:
        raise ConfigError(
            f"{key}: job {source.id} optimized a {before} system, this job trains a {now}"
            " system: name a prompt job on the same system"
        )
    source_seed = _seed_of(store, source)
    if source_seed is None:
        return
    old, new = set(source_seed.components), set(seed.components)
    if old != new:
        raise ConfigError(
            f"{key}: job {source.id} optimized the components {', '.join(sorted(old)) or 'none'},"
            f" this job's system has {', '.join(sorted(new)) or 'none'}: name a prompt job on"
            " the same system"
        )


def _seed_of(store: Store, job: JobRecord) -> Candidate | None:
    """The seed candidate of a prompt job, as its checkpoint names it (None if unknown)."""
    checkpoint = store.get_checkpoint(job.id)
    seed_id = None if checkpoint is None else checkpoint.state.get("seed_candidate_id")
    if not seed_id:
        return None
    return next((c for c in store.job_candidates(job.id) if c.id == seed_id), None)


def _stated_kind(config: Mapping[str, Any]) -> str | None:
    """The ``[system] kind`` a config states, if any (a built-in task's program states none)."""
    kind = (config.get("system") or {}).get("kind")
    return None if kind is None else str(kind)
