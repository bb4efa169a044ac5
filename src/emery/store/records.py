"""What the store reads and writes: typed records for jobs, checkpoints, candidates and
evaluations, and the filters of its queries (rollouts, attempts and spans are the core
models of ``emery.core.rollouts`` and ``emery.core.spans``)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from emery.core.approvals import Approval
from emery.core.events import Event
from emery.core.example_result import ExampleResult
from emery.core.models import Candidate, Demo, Lineage
from emery.core.rollouts import Attempt, Rollout

T = TypeVar("T")


def to_datetime(value: float | None) -> datetime | None:
    """A stored UNIX time as an aware UTC datetime."""
    return None if value is None else datetime.fromtimestamp(value, tz=UTC)


class Page(BaseModel, Generic[T]):
    """One page of a query: the items, the total that matched, and where the page starts."""

    items: list[T]
    total: int
    offset: int = 0
    limit: int | None = None


class NewJob(BaseModel):
    """What creating a job needs."""

    id: str
    name: str
    kind: str = "optimize"
    algorithm: str
    system_name: str | None = None
    system_id: str | None = None
    config: dict[str, Any]
    resolved_config: dict[str, Any] | None = None
    config_hash: str = ""
    config_path: str | None = None
    base_dir: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class JobRecord(BaseModel):
    """A job as stored: identity, config, state, ownership, timestamps and headline results."""

    id: str
    name: str
    kind: str
    algorithm: str
    system_name: str | None = None
    system_id: str | None = None
    state: str
    requested_action: str | None = None
    config: dict[str, Any]
    resolved_config: dict[str, Any] | None = None
    config_hash: str = ""
    config_path: str | None = None
    base_dir: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    eval_scope: str | None = None
    owner: str | None = None
    heartbeat_at: datetime | None = None
    heartbeat_age_s: float | None = None
    """Seconds since the owner's last heartbeat when the row was read, both by the store's
    clock (``store_time``): what tells a dead owner, whatever the reader's clock says (None
    for a job no process owns)."""
    last_seq: int = 0
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    best_candidate_id: str | None = None
    best_score: float | None = None
    baseline_score: float | None = None
    stop_reason: str | None = None
    error: str | None = None
    result: dict[str, Any] | None = None

    @property
    def terminal(self) -> bool:
        return self.state in ("succeeded", "failed", "cancelled")


class JobFilter(BaseModel):
    """Which jobs to list; every set field must match."""

    state: list[str] | None = None
    algorithm: str | None = None
    kind: str | None = None
    system_name: str | None = None
    config_hash: str | None = None
    name: str | None = None


class CheckpointRecord(BaseModel):
    """The latest checkpoint of a job: algorithm state, budget spent and LM usage by role."""

    job_id: str
    number: int
    state: dict[str, Any]
    budget: dict[str, Any]
    usage: dict[str, Any]
    created_at: datetime | None = None


class CandidateRecord(BaseModel):
    """A candidate of one job, with its mean score on the listed split so far."""

    job_id: str
    ordinal: int
    candidate: Candidate
    score: float | None = None
    n: int = 0
    failed: int = 0
    """Of the ``n`` runs, those that failed (scored 0 for an error, not an answer)."""
    timeouts: int = 0
    """Of the failed runs, those that ran out of time or fell silent."""
    unreadable: int = 0
    """Of the ``n`` runs, replies the parser could not read (scored 0 as wrong answers)."""
    created_at: datetime | None = None

    @property
    def id(self) -> str:
        return self.candidate.id


class EvaluationRecord(BaseModel):
    """One stored evaluation: its cache key, the example's content hash and the result."""

    id: int | None = None
    scope: str
    example_hash: str
    job_id: str | None = None
    rollout_id: str | None = None
    result: ExampleResult
    created_at: datetime | None = None


class EvaluationFilter(BaseModel):
    job_id: str | None = None
    scope: str | None = None
    candidate_id: str | None = None
    example_id: str | None = None
    split: str | None = None
    min_score: float | None = None
    max_score: float | None = None
    errors_only: bool = False


class RolloutEnd(BaseModel):
    """How an attempt of a queued rollout ended, as its runner reports it
    (``RolloutQueue.finish_rollout``; over HTTP, the flat fields of a finish).

    ``status`` is the rollout's final status, stored only if this is its first result:
    ``succeeded`` (the system answered; ``score`` says how well), ``failed`` (it ended in
    ``error``) or ``cancelled``. ``attempt_status`` is the attempt's: ``succeeded``,
    ``failed``, ``timeout`` (it ran out of time) or ``unresponsive`` (it fell silent).
    ``output`` is the system's output, ``result`` the ``ExampleResult`` as JSON (kept as
    the rollout's ``metadata["result"]``). Statuses are plain strings, as a finish's HTTP
    body has always taken them."""

    model_config = ConfigDict(frozen=True)

    status: str
    attempt_status: str
    error: str | None = None
    output: Any = None
    score: float | None = None
    result: dict[str, Any] = Field(default_factory=dict)

    def fields(self) -> dict[str, Any]:
        """The fields by name, their values as they are (not copied): a finish's body."""
        return {name: getattr(self, name) for name in RolloutEnd.model_fields}


class RolloutFilter(BaseModel):
    job_id: str | None = None
    candidate_id: str | None = None
    example_id: str | None = None
    split: str | None = None
    status: list[str] | None = None


class SpanFilter(BaseModel):
    job_id: str | None = None
    rollout_id: str | None = None
    attempt_id: str | None = None
    trace_id: str | None = None
    name: str | None = None
    since_seq: int | None = None
    started_after: datetime | None = None
    """Spans that started at or after this time."""
    started_before: datetime | None = None
    """Spans that started before this time."""


class ResourceRecord(BaseModel):
    """A versioned named document (a prompt set, a graph spec, a dataset summary)."""

    name: str
    version: int
    kind: str
    content: Any
    job_id: str | None = None
    created_at: datetime | None = None


class WorkerRecord(BaseModel):
    """A process that runs rollouts (``emery runner``): ``status`` idle, busy or stopped,
    ``job_id`` the job of the rollouts it holds now, ``metadata`` what it said of itself
    (``executor``, ``concurrency``, the one job it serves). ``rollouts_done`` and
    ``rollouts_failed`` count its finished attempts (failed: failed, timed out or
    unresponsive), filled in by ``Store.list_workers``."""

    id: str
    host: str
    pid: int
    status: str = "idle"
    job_id: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    started_at: datetime | None = None
    heartbeat_at: datetime | None = None
    rollouts_done: int = 0
    rollouts_failed: int = 0


class LMTally(BaseModel):
    """LM calls, tokens and cost of one model in one role, summed over jobs."""

    model: str
    role: str
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    rate_limited: int = 0
    rate_limit_wait_s: float = 0.0

    def add(self, usage: Mapping[str, Any]) -> None:
        """Add one job's usage of the role (a ``RoleUsage`` as JSON)."""
        self.calls += int(usage.get("calls") or 0)
        self.prompt_tokens += int(usage.get("prompt_tokens") or 0)
        self.completion_tokens += int(usage.get("completion_tokens") or 0)
        self.cost_usd += float(usage.get("cost_usd") or 0.0)
        self.rate_limited += int(usage.get("rate_limited") or 0)
        self.rate_limit_wait_s += float(usage.get("rate_limit_wait_s") or 0.0)


class StoreTallies(BaseModel):
    """What a store holds, counted (``Store.tallies``, the server's ``/metrics``)."""

    jobs: dict[str, int] = Field(default_factory=dict)
    """Jobs by state."""
    rollouts: dict[str, int] = Field(default_factory=dict)
    """Rollouts by status (``queuing`` is the queue's depth)."""
    workers: dict[str, int] = Field(default_factory=dict)
    """Runners by status."""
    lm: list[LMTally] = Field(default_factory=list)


class PruneCounts(BaseModel):
    """What ``Store.prune`` deleted, or would delete with ``dry_run``."""

    before: datetime
    """Finished jobs last updated before this time, and application traces whose newest
    span started before it (with ``app_traces``), were pruned."""
    jobs: int = 0
    """Finished jobs whose spans, rollouts and attempts went (their rows, candidates,
    evaluations, events and checkpoints stay)."""
    spans: int = 0
    rollouts: int = 0
    attempts: int = 0
    app_spans: int = 0
    """Application spans (spans with no job or rollout) deleted."""
    kept_jobs: int = 0
    """Finished jobs old enough that were kept whole: a published prompt's job, or one
    with an approval request still pending."""
    dry_run: bool = False
    bytes_before: int | None = None
    """The SQLite file's size (with its ``-wal`` file) before; None for other stores."""
    bytes_after: int | None = None
    """Its size after the delete and ``VACUUM``; None for other stores or a dry run."""

    @property
    def rows(self) -> int:
        return self.spans + self.rollouts + self.attempts + self.app_spans

    @property
    def bytes_freed(self) -> int | None:
        if self.bytes_before is None or self.bytes_after is None:
            return None
        return self.bytes_before - self.bytes_after


class SystemRecord(BaseModel):
    id: str
    name: str
    kind: str
    version: str
    config: dict[str, Any] | None = None
    created_at: datetime | None = None


class StepWrite(BaseModel):
    """Everything one engine step stores, in one transaction.

    ``job_fields`` updates columns of the job row (best candidate, scores, state...).
    ``write_id`` names the write: sent again after its connection dropped at the commit,
    a write already stored is not stored twice (``commit_step`` returns its events).
    """

    events: list[Event] = Field(default_factory=list)
    candidates: list[Candidate] = Field(default_factory=list)
    evaluations: list[EvaluationRecord] = Field(default_factory=list)
    rollouts: list[Rollout] = Field(default_factory=list)
    attempts: list[Attempt] = Field(default_factory=list)
    checkpoint: CheckpointRecord | None = None
    approvals: list[Approval] = Field(default_factory=list)
    job_fields: dict[str, Any] = Field(default_factory=dict)
    expect_owner: str | None = None
    final_state: str | None = None
    final_reason: str | None = None
    write_id: str | None = None


def candidate_from_row(row: Any) -> Candidate:
    """Rebuild a stored candidate (its id is recomputed from the stored texts)."""
    return Candidate(
        components=dict(row.components),
        demos={
            stage: tuple(Demo.model_validate(d) for d in demos)
            for stage, demos in (row.demos or {}).items()
        },
        lineage=Lineage(
            parents=tuple(row.parents or ()),
            generation=row.generation,
            operation=row.operation,
            iteration=row.iteration,
            details=dict(row.details or {}),
        ),
    )
