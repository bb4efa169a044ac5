"""``[job] warm_start = "JOB"``: an earlier job's candidates, checked and loaded for a search.

``check_warm_start`` runs when the job is created (``SearchKind.check``) and
``load_warm_start`` when its search starts (the engine's first step; a resumed job has the
warm candidates in its checkpoint already): both refuse, in one line, a job id that names
no job, a job that is no prompt search or has not run, another system (another kind, or
other component names) and an algorithm that cannot take a warm start. The candidates
taken are the earlier job's best and what its algorithm hands over (``handoff``: GEPA's
Pareto front, APO's beam, MIPRO's programs scored on full val), best first, at most
``warm_start_candidates``, each with the lineage ``warm_start`` that names the earlier
job and candidate and its earlier val score. What an algorithm does with them is in
``algorithms/warm_start.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from emery.algorithms.approval import reviewer_notes
from emery.algorithms.base import WARM_START, Algorithm, AlgorithmState, WarmStart
from emery.algorithms.registry import build_algorithm, settings_table
from emery.algorithms.warm_start import WarmStartable
from emery.config.loading import job_config
from emery.config.schema import JobConfig
from emery.core.errors import ConfigError, EmeryError
from emery.core.models import Candidate, Lineage
from emery.store.protocol import Store
from emery.store.records import JobRecord
from emery.systems.base import System
from emery.systems.capabilities import MutatesStructure

SEARCH_KINDS = ("optimize", "eval")


def system_kind(config: JobConfig, system: System) -> str:
    """The kind a job's system is registered under: ``[system] kind``, else its class."""
    section = config.model_dump(mode="json").get("system") or {}
    return str(section.get("kind", type(system).__name__))


def check_warm_start(store: Store, config: JobConfig, system: System, algorithm: object) -> None:
    """Refuse, in one line, a ``warm_start`` this job cannot take (see the module doc)."""
    if config.job.warm_start is None:
        return
    if not isinstance(algorithm, WarmStartable):
        raise ConfigError(
            f"job.warm_start: algorithm {config.job.algorithm!r} cannot start from an earlier"
            " job's candidates (gepa, graph_gepa, mipro and apo can)"
        )
    load_warm_start(store, config, system)


def pinned(store: Store, config: JobConfig) -> JobConfig:
    """``config`` with its ``warm_start`` resolved to a job id, as the job is stored: a
    name names the newest job of that name, which, once a job of the same name is
    stored, would be that job itself."""
    name = config.job.warm_start
    if name is None:
        return config
    job = config.job.model_copy(update={"warm_start": store.resolve_job_id(name)})
    return config.model_copy(update={"job": job})


def load_warm_start(store: Store, config: JobConfig, system: System) -> WarmStart | None:
    """The candidates ``config``'s ``warm_start`` names, for a search of ``system``."""
    name = config.job.warm_start
    if name is None:
        return None
    try:
        earlier = store.get_job(store.resolve_job_id(name))
    except EmeryError as exc:
        raise ConfigError(f"job.warm_start: {exc}") from None
    checkpoint = store.get_checkpoint(earlier.id)
    if earlier.kind not in SEARCH_KINDS:
        raise ConfigError(
            f"job.warm_start: job {earlier.id} is an {earlier.kind} job; only a prompt"
            " search's candidates can start one"
        )
    if checkpoint is None:
        raise ConfigError(
            f"job.warm_start: job {earlier.id} has not run yet (it is {earlier.state}):"
            " it has no candidates to start from"
        )
    stored = {c.id: c for c in store.job_candidates(earlier.id)}
    algorithm = _earlier_algorithm(earlier)
    state: AlgorithmState = algorithm.state_type.model_validate(checkpoint.state)
    _check_same_system(earlier, stored.get(state.seed_candidate_id), config, system)
    scores: dict[str, float | None] = {}
    if earlier.best_candidate_id:
        scores[earlier.best_candidate_id] = earlier.best_score
    scores.update({k: v for k, v in state.handoff().items() if k not in scores})
    picked = [
        _warm(stored[cid], earlier.id, score) for cid, score in scores.items() if cid in stored
    ]
    return WarmStart(
        job_id=earlier.id,
        algorithm=earlier.algorithm,
        candidates=tuple(picked[: config.job.warm_start_candidates]),
        what=type(state).handoff_what,
    )


def earlier_notes(store: Store, config: JobConfig, created_at: datetime) -> tuple[str, ...]:
    """The reasons people gave, before ``created_at`` (the new job's creation, so a resumed
    job reads the same), for rejecting or editing ``config``'s warm start's candidates (as
    its best or for publishing), oldest first."""
    name = config.job.warm_start
    if name is None:
        return ()
    before = created_at.timestamp()
    declined = [
        a
        for a in store.list_approvals(store.resolve_job_id(name))
        if a.status in ("rejected", "edited") and (a.decided_at or 0.0) <= before
    ]
    return tuple(reviewer_notes(declined))


def _earlier_algorithm(earlier: JobRecord) -> Algorithm[Any]:
    """The earlier job's algorithm, built from its stored config (for its state type)."""
    config = job_config(earlier)
    name = config.job.algorithm
    return build_algorithm(name, settings_table(name, config.algorithm))


def _check_same_system(
    earlier: JobRecord,
    earlier_seed: Candidate | None,
    config: JobConfig,
    system: System,
) -> None:
    """The earlier job optimized a system of the same kind (where both configs state
    one) with the same components."""
    earlier_kind = _stated_kind(earlier.resolved_config or earlier.config)
    kind = _stated_kind(config.model_dump(mode="json"))
    if earlier_kind is not None and kind is not None and earlier_kind != kind:
        raise ConfigError(
            f"job.warm_start: job {earlier.id} optimized a {earlier_kind} system, this job a"
            f" {kind} system: a warm start needs the same system"
        )
    if earlier_seed is None:
        return
    before, now = _names(system, earlier_seed), _names(system, system.seed_candidate())
    if before != now:
        raise ConfigError(
            f"job.warm_start: job {earlier.id} optimized the components"
            f" {', '.join(sorted(before)) or 'none'}, this system has"
            f" {', '.join(sorted(now)) or 'none'}: a warm start needs the same system"
        )


def _stated_kind(config: Mapping[str, Any]) -> str | None:
    """The ``[system] kind`` a config states, if any (a built-in task's program, or a
    system passed as an object, states none: their components decide)."""
    kind = (config.get("system") or {}).get("kind")
    return None if kind is None else str(kind)


def _names(system: System, candidate: Candidate) -> set[str]:
    """A candidate's component names, without a structure component (a graph's spec)."""
    names = set(candidate.components)
    if isinstance(system, MutatesStructure):
        names.discard(system.structure_component)
    return names


def _warm(candidate: Candidate, job_id: str, score: float | None) -> Candidate:
    """``candidate`` with the lineage of a warm start from ``job_id``."""
    details = {"job_id": job_id, "candidate_id": candidate.id, "earlier_val_score": score}
    lineage = Lineage(operation=WARM_START, details=details)
    return Candidate(components=candidate.components, demos=candidate.demos, lineage=lineage)
