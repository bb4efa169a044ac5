"""The ``Store`` protocol: what the engine, the CLI, the SDK and the server may ask of a store.

``SQLiteStore`` (default), ``MemoryStore`` and ``PostgresStore`` implement it over one
schema. Every method is one transaction; ``commit_step`` is the engine's atomic step write.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from emery.core.approvals import Approval
from emery.core.events import Event
from emery.core.feedback import FeedbackRecord
from emery.core.models import Candidate
from emery.core.rollouts import Attempt, Rollout
from emery.core.spans import SpanRecord
from emery.store.records import (
    CandidateRecord,
    CheckpointRecord,
    EvaluationFilter,
    EvaluationRecord,
    JobFilter,
    JobRecord,
    NewJob,
    Page,
    PruneCounts,
    ResourceRecord,
    RolloutEnd,
    RolloutFilter,
    SpanFilter,
    StepWrite,
    StoreTallies,
    SystemRecord,
    WorkerRecord,
)


class TraceWriter(Protocol):
    """Where a ``StoreRecorder`` writes rollouts, attempts and spans."""

    def add_traces(
        self,
        rollouts: Sequence[Rollout],
        attempts: Sequence[Attempt],
        spans: Sequence[SpanRecord],
    ) -> None: ...


class RolloutQueue(TraceWriter, Protocol):
    """What a runner (``emery runner``) asks of a store: the job and candidate it runs,
    its worker row, claims, leases and results, and the spans it writes. A ``Store``
    is one; ``workers.http_queue.HttpQueue`` is one over a server's ``/api/queue``."""

    def get_job(self, job_id: str) -> JobRecord: ...
    def get_resource(self, name: str, version: int | None = None) -> ResourceRecord: ...
    def register_worker(self, record: WorkerRecord) -> None: ...
    def worker_heartbeat(
        self, worker_id: str, *, status: str | None = None, job_id: str | None = None
    ) -> None: ...
    def claim_rollout(self, worker_id: str, *, job_id: str | None = None) -> Rollout | None: ...
    def heartbeat_attempt(self, attempt_id: str) -> bool: ...
    def finish_rollout(self, rollout_id: str, attempt_id: str, end: RolloutEnd) -> bool: ...
    def finish_and_claim(
        self,
        rollout_id: str,
        attempt_id: str,
        end: RolloutEnd,
        *,
        worker_id: str,
        job_id: str | None = None,
    ) -> tuple[bool, Rollout | None]: ...
    def requeue_rollout(
        self, rollout_id: str, attempt_id: str, number: int, *, attempt_status: str, error: str
    ) -> bool: ...
    def expire_leases(self, *, job_id: str | None = None) -> int: ...


@runtime_checkable
class Store(RolloutQueue, Protocol):
    """Durable jobs, events, checkpoints, candidates, evaluations, rollouts and spans (a
    runner's calls are ``RolloutQueue``'s)."""

    url: str

    def close(self) -> None: ...

    # jobs and their state machine
    def create_job(self, job: NewJob) -> JobRecord: ...
    def resolve_job_id(self, prefix: str) -> str: ...
    def list_jobs(
        self,
        filter: JobFilter | None = None,
        *,
        sort: str | None = None,
        limit: int | None = 50,
        offset: int = 0,
    ) -> Page[JobRecord]: ...
    def update_job(self, job_id: str, **fields: Any) -> JobRecord: ...
    def transition(
        self,
        job_id: str,
        target: str,
        *,
        event_kind: str | None = None,
        reason: str | None = None,
        expect: Sequence[str] | None = None,
        fields: dict[str, Any] | None = None,
        extra_events: Sequence[Event] = (),
        expect_owner: str | None = None,
    ) -> tuple[JobRecord, list[Event]]: ...
    def take_over(
        self, job_id: str, *, owner: str, expect_owner: str | None, reason: str
    ) -> tuple[JobRecord, list[Event]]: ...
    def swap_owner(
        self, job_id: str, owner: str | None, *, state: str, expect_owner: str | None
    ) -> JobRecord | None: ...
    def set_requested_action(
        self, job_id: str, action: str | None, *, only_state: str | None = None
    ) -> bool: ...
    def heartbeat(self, job_id: str, owner: str) -> JobRecord: ...
    def delete_job(self, job_id: str) -> None: ...
    def keyed_job(self, key: str) -> tuple[str, str] | None: ...
    def bind_key(self, key: str, request_hash: str, job_id: str) -> tuple[str, str]: ...

    # events and checkpoints
    def append_events(self, job_id: str, events: Sequence[Event]) -> list[Event]: ...
    def list_events(
        self,
        job_id: str,
        *,
        since: int = 0,
        kinds: Sequence[str] | None = None,
        limit: int | None = None,
    ) -> list[Event]: ...
    def get_checkpoint(self, job_id: str) -> CheckpointRecord | None: ...
    def commit_step(self, job_id: str, write: StepWrite) -> list[Event]: ...

    # candidates, evaluations, systems
    def add_candidates(self, job_id: str, candidates: Sequence[Candidate]) -> None: ...
    def list_candidates(
        self,
        job_id: str,
        *,
        scope: str | None = None,
        split: str = "val",
        sort: str | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> Page[CandidateRecord]: ...
    def get_candidate(self, job_id: str, candidate_id: str) -> Candidate: ...
    def job_candidates(self, job_id: str) -> list[Candidate]: ...
    def add_evaluations(self, records: Sequence[EvaluationRecord]) -> None: ...
    def load_evaluations(self, scope: str) -> list[EvaluationRecord]: ...
    def list_evaluations(
        self,
        filter: EvaluationFilter | None = None,
        *,
        sort: str | None = None,
        limit: int | None = 100,
        offset: int = 0,
    ) -> Page[EvaluationRecord]: ...
    def count_evaluations(self, job_id: str) -> int: ...
    def set_job_examples(self, job_id: str, hashes: Mapping[tuple[str, str], str]) -> None: ...
    def register_system(
        self, *, name: str, kind: str, version: str, config: dict[str, Any] | None
    ) -> str: ...
    def list_systems(self, name: str | None = None) -> list[SystemRecord]: ...

    # rollouts, attempts, spans
    def add_rollouts(self, records: Sequence[Rollout]) -> None: ...
    def get_rollout(self, rollout_id: str) -> Rollout: ...
    def update_rollout(
        self, rollout_id: str, *, status: str | None = None, **fields: Any
    ) -> Rollout: ...
    def list_rollouts(
        self,
        filter: RolloutFilter | None = None,
        *,
        sort: str | None = None,
        limit: int | None = 100,
        offset: int = 0,
    ) -> Page[Rollout]: ...
    def add_attempt(self, record: Attempt) -> Attempt: ...
    def update_attempt(
        self, attempt_id: str, *, status: str | None = None, **fields: Any
    ) -> Attempt: ...
    def list_attempts(self, rollout_id: str) -> list[Attempt]: ...
    def add_spans(self, records: Sequence[SpanRecord]) -> None: ...
    def list_spans(
        self, filter: SpanFilter | None = None, *, limit: int | None = 1000, offset: int = 0
    ) -> Page[SpanRecord]: ...

    # feedback on recorded traces (``emery.core.feedback``)
    def add_feedback(self, record: FeedbackRecord) -> FeedbackRecord: ...
    def list_feedback(self, trace_ids: Collection[str] | None = None) -> list[FeedbackRecord]: ...

    # resources and workers
    def put_resource(
        self, name: str, content: Any, *, kind: str = "document", job_id: str | None = None
    ) -> ResourceRecord: ...
    def list_resources(self, name: str | None = None) -> list[ResourceRecord]: ...
    def list_workers(self) -> list[WorkerRecord]: ...
    def tallies(self) -> StoreTallies: ...
    def prune(
        self,
        before: datetime,
        *,
        app_traces: bool = False,
        dry_run: bool = False,
        vacuum: bool = True,
    ) -> PruneCounts: ...

    # approval requests (``emery.core.approvals``)
    def add_approval(self, approval: Approval) -> Approval: ...
    def save_approvals(self, approvals: Sequence[Approval]) -> None: ...
    def get_approval(self, approval_id: str) -> Approval: ...
    def list_approvals(
        self, job_id: str | None = None, *, status: str | None = None
    ) -> list[Approval]: ...
    def decide_approval(
        self,
        approval_id: str,
        action: str,
        *,
        reason: str | None = None,
        edited: dict[str, str] | None = None,
    ) -> Approval: ...

    # the rollout queue beyond a runner's calls (``RolloutQueue``; see ``emery.store.sql.queue``)
    def withdraw_rollouts(self, rollout_ids: Sequence[str], *, error: str) -> int: ...
