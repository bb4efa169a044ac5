"""A job's result: scores before and after, the best candidate, the top candidates, budget and
LM usage. Built from the store, so it can be rebuilt at any time (``emery report JOB``)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from emery.core.events import Event, PaceWarning, RolloutsFailed, SearchNotRun
from emery.core.models import Candidate
from emery.evaluation.budget import BudgetConfig, BudgetUsage
from emery.evaluation.front import CostFront
from emery.evaluation.label_agreement import LabelAgreement
from emery.evaluation.stats import ScoreSummary
from emery.lm.usage import RoleUsage
from emery.store.protocol import Store
from emery.store.records import CandidateRecord, CheckpointRecord, JobRecord
from emery.store.states import NotFound

TOP_CANDIDATES = 10


class CandidateSummary(BaseModel):
    """One candidate in the result's table: its val score so far and where it came from."""

    id: str
    score: float | None = None
    n: int = 0
    failed: int = 0
    timeouts: int = 0
    unreadable: int = 0
    """Replies the parser could not read (scored 0 as wrong answers, not failed)."""
    parents: list[str] = Field(default_factory=list)
    operation: str = "seed"
    generation: int = 0
    iteration: int | None = None


class JobResult(BaseModel):
    """What a job found. ``lift_*`` compare best and seed on test when a test split was
    scored (``lift_split``), else on val."""

    job_id: str
    name: str
    kind: str
    algorithm: str
    state: str
    stop_reason: str | None = None
    error: str | None = None
    warnings: list[str] = Field(default_factory=list)
    """Things that make the scores less than they seem: the seed's failed runs and replies
    the parser could not read, a search that never ran or a wall-time budget too short for
    the plan."""
    dataset_sizes: dict[str, int] = Field(default_factory=dict)
    seed_candidate: Candidate | None = None
    best_candidate: Candidate | None = None
    baseline_val: float | None = None
    best_val: float | None = None
    baseline_test: ScoreSummary | None = None
    best_test: ScoreSummary | None = None
    references_test: dict[str, ScoreSummary] = Field(default_factory=dict)
    """Each ``[references.NAME]`` candidate's test score (a hand-written expert prompt)."""
    lift_split: str | None = None
    lift_abs: float | None = None
    lift_rel: float | None = None
    top_candidates: list[CandidateSummary] = Field(default_factory=list)
    candidates_total: int = 0
    evaluations_paid: int = 0
    budget: BudgetUsage = BudgetUsage()
    limits: BudgetConfig = BudgetConfig()
    usage: dict[str, RoleUsage] = Field(default_factory=dict)
    search_usage: dict[str, RoleUsage] = Field(default_factory=dict)
    """LM usage by role when the search stopped: what ``lm_tokens`` and ``lm_cost_usd``
    count (``usage`` adds the test scoring after it); empty on older results."""
    front: CostFront | None = None
    """The candidates scored on val with their cost per example, the front over ``[job]
    objectives`` and the winner ``select`` chose (``best_candidate``); None on the defaults."""
    created_at: datetime | None = None
    finished_at: datetime | None = None
    files: dict[str, str] = Field(default_factory=dict)
    labels: LabelAgreement | None = None
    """For a dataset built from traces: how many examples had feedback and how the
    verifier agreed with it (``evaluation.label_agreement``)."""

    @property
    def best_score(self) -> float | None:
        return self.best_test.mean if self.best_test is not None else self.best_val


def _lift(baseline: float | None, best: float | None) -> tuple[float | None, float | None]:
    if baseline is None or best is None:
        return None, None
    absolute = best - baseline
    return absolute, (absolute / baseline if baseline > 0 else None)


def _stored_labels(stored: dict[str, Any]) -> LabelAgreement | None:
    found = stored.get("labels")
    return LabelAgreement.model_validate(found) if found else None


def _stored_references(stored: dict[str, Any]) -> dict[str, ScoreSummary]:
    return {
        name: ScoreSummary.model_validate(summary)
        for name, summary in (stored.get("references_test") or {}).items()
    }


def _candidate(store: Store, job_id: str, candidate_id: str | None) -> Candidate | None:
    if not candidate_id:
        return None
    try:
        return store.get_candidate(job_id, candidate_id)
    except NotFound:
        return None


def build_result(
    store: Store,
    job: JobRecord,
    *,
    baseline_test: ScoreSummary | None = None,
    best_test: ScoreSummary | None = None,
    references_test: dict[str, ScoreSummary] | None = None,
    usage: dict[str, RoleUsage] | None = None,
    search_usage: dict[str, RoleUsage] | None = None,
    state: str | None = None,
    stop_reason: str | None = None,
    dataset_sizes: dict[str, int] | None = None,
    labels: LabelAgreement | None = None,
    front: CostFront | None = None,
    top: int = TOP_CANDIDATES,
) -> JobResult:
    """The result of ``job`` as the store holds it now (test scores and the cost front
    given by the engine); a front's winner is the best candidate."""
    checkpoint = store.get_checkpoint(job.id)
    algo_state: dict[str, Any] = checkpoint.state if checkpoint is not None else {}
    stored = job.result or {}
    baseline_test = baseline_test or _stored_summary(stored, "baseline_test")
    best_test = best_test or _stored_summary(stored, "best_test")
    references_test = _stored_references(stored) if references_test is None else references_test
    if usage is None:
        usage = _stored_usage(checkpoint)
    if search_usage is None:
        kept = stored.get("search_usage", {})
        search_usage = {role: RoleUsage.model_validate(u) for role, u in kept.items()}
    page = store.list_candidates(job.id, limit=top)
    resolved = job.resolved_config or job.config
    baseline_val = algo_state.get("baseline_val_score", job.baseline_score)
    best_val = algo_state.get("best_val_score", job.best_score)
    best_id = algo_state.get("best_candidate_id") or job.best_candidate_id
    front = front or _stored_front(stored)
    winner = front.member(front.winner_id) if front is not None else None
    if winner is not None:
        best_id, best_val = winner.candidate_id, winner.score
    split, lift_abs, lift_rel = _lift_on(baseline_val, best_val, baseline_test, best_test)
    seed_id = algo_state.get("seed_candidate_id")
    return JobResult(
        job_id=job.id,
        name=job.name,
        kind=job.kind,
        algorithm=job.algorithm,
        state=state or job.state,
        stop_reason=stop_reason or job.stop_reason,
        error=job.error,
        warnings=[
            *seed_warnings(store, job.id, seed_id, baseline_test),
            *search_warnings(store, job.id),
        ],
        dataset_sizes=dataset_sizes or stored.get("dataset_sizes", {}),
        seed_candidate=_candidate(store, job.id, seed_id),
        best_candidate=_candidate(store, job.id, best_id),
        baseline_val=baseline_val,
        best_val=best_val,
        baseline_test=baseline_test,
        best_test=best_test,
        references_test=references_test,
        lift_split=split,
        lift_abs=lift_abs,
        lift_rel=lift_rel,
        top_candidates=[_summary(record) for record in page.items],
        candidates_total=page.total,
        evaluations_paid=store.count_evaluations(job.id),
        budget=BudgetUsage.model_validate(checkpoint.budget if checkpoint else {}),
        limits=BudgetConfig.model_validate(resolved.get("job", {}).get("budget", {})),
        usage=usage,
        search_usage=search_usage,
        front=front,
        created_at=job.created_at,
        finished_at=job.finished_at,
        files=dict(stored.get("files", {})),
        labels=labels or _stored_labels(stored),
    )


def seed_warnings(
    store: Store, job_id: str, seed_id: str | None, seed_test: ScoreSummary | None
) -> list[str]:
    """A warning for each split where some of the seed's runs failed (scored 0 for an
    error, so its baseline understates it), with the first error the job recorded; and one
    for each split where some of its replies could not be read (wrong answers, which a
    reply format the parser reads may turn right)."""
    if not seed_id:
        return []
    counts: list[tuple[str, int, int, int]] = []
    unreadable: list[tuple[str, int, int]] = []
    for record in store.list_candidates(job_id, split="val", limit=None).items:
        if record.id == seed_id and record.failed:
            counts.append(("val", record.failed, record.timeouts, record.n))
        if record.id == seed_id and record.unreadable:
            unreadable.append(("val", record.unreadable, record.n))
    if seed_test is not None and seed_test.failed:
        counts.append(("test", seed_test.failed, seed_test.timeouts, seed_test.n))
    if seed_test is not None and seed_test.unreadable:
        unreadable.append(("test", seed_test.unreadable, seed_test.n))
    example = ""
    for item in store.list_events(job_id, kinds=[RolloutsFailed.kind], limit=1):
        example = f"; e.g. example {item.data['example_id']}: {item.data['error']}"
    failed_lines = [
        f"the seed failed on {failed} of {n} {split} examples"
        + (f" ({timeouts} timed out)" if timeouts else "")
        + ", each scored 0"
        + (example if index == 0 else "")
        for index, (split, failed, timeouts, n) in enumerate(counts)
    ]
    return failed_lines + [
        f"the parser could not read the seed's reply on {count} of {n} {split} examples,"
        " each scored 0 as a wrong answer"
        for split, count, n in unreadable
    ]


def search_warnings(store: Store, job_id: str) -> list[str]:
    """The job's ``search_not_run`` and ``pace_warning`` events, in words."""
    return event_warnings(store.list_events(job_id, kinds=[SearchNotRun.kind, PaceWarning.kind]))


def event_warnings(events: Iterable[Event]) -> list[str]:
    """The ``search_not_run`` and ``pace_warning`` events among ``events``, in words."""
    kinds = (SearchNotRun.kind, PaceWarning.kind)
    payloads = [item.payload() for item in events if item.kind in kinds]
    return [p.message() for p in payloads if isinstance(p, SearchNotRun | PaceWarning)]


def _stored_usage(checkpoint: CheckpointRecord | None) -> dict[str, RoleUsage]:
    """The LM usage by role kept in the last checkpoint."""
    stored = checkpoint.usage if checkpoint is not None else {}
    return {role: RoleUsage.model_validate(value) for role, value in stored.items()}


def _stored_front(stored: dict[str, Any]) -> CostFront | None:
    """The cost front kept in a stored result, if any."""
    return CostFront.model_validate(stored["front"]) if stored.get("front") else None


def _stored_summary(stored: dict[str, Any], key: str) -> ScoreSummary | None:
    """A test summary kept in a stored result, if any."""
    return ScoreSummary.model_validate(stored[key]) if stored.get(key) else None


def _lift_on(
    baseline_val: float | None,
    best_val: float | None,
    baseline_test: ScoreSummary | None,
    best_test: ScoreSummary | None,
) -> tuple[str | None, float | None, float | None]:
    """The split the lift is measured on (test when both were scored), and the lift."""
    if baseline_test is not None and best_test is not None:
        return ("test", *_lift(baseline_test.mean, best_test.mean))
    split = "val" if baseline_val is not None else None
    return (split, *_lift(baseline_val, best_val))


def _summary(record: CandidateRecord) -> CandidateSummary:
    """One row of the result's candidate table."""
    lineage = record.candidate.lineage
    return CandidateSummary(
        id=record.id,
        score=record.score,
        n=record.n,
        failed=record.failed,
        timeouts=record.timeouts,
        unreadable=record.unreadable,
        parents=list(lineage.parents),
        operation=lineage.operation,
        generation=lineage.generation,
        iteration=lineage.iteration,
    )


def result_paths(job: JobRecord, base_dir: Path) -> tuple[Path, Path]:
    """Where a job's JSON result and text report go: ``results/`` next to the config."""
    folder = base_dir / "results"
    stem = f"{job.name}-{job.id}" if job.name != job.id else job.id
    return folder / f"{stem}.json", folder / f"{stem}.txt"


def write_result(result: JobResult, text: str, json_path: Path, text_path: Path) -> None:
    """Write the JSON result and the text report (replacing earlier ones)."""
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(result.model_dump_json(indent=2), encoding="utf-8")
    text_path.write_text(text, encoding="utf-8")
