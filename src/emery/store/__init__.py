"""Durable state: jobs, events, checkpoints, candidates, evaluations, rollouts and spans.

``open_store()`` gives the default SQLite file store (``./.emery/emery.db``);
``MemoryStore`` is for tests and ``PostgresStore`` for several machines.
"""

from emery.store.backends import (
    DEFAULT_PATH,
    STORE_ENV,
    MemoryStore,
    PostgresStore,
    SQLiteStore,
    open_store,
)
from emery.store.migrate import SchemaError
from emery.store.protocol import Store
from emery.store.records import (
    AttemptRecord,
    CandidateRecord,
    CheckpointRecord,
    EvaluationFilter,
    EvaluationRecord,
    JobFilter,
    JobRecord,
    NewJob,
    Page,
    ResourceRecord,
    RolloutFilter,
    RolloutRecord,
    SpanFilter,
    SpanRecord,
    StepWrite,
    SystemRecord,
    WorkerRecord,
)
from emery.store.sql.jobs import OwnershipLost
from emery.store.states import (
    JOB_STATES,
    JOB_TRANSITIONS,
    TERMINAL_STATES,
    IllegalTransition,
    JobState,
    NotFound,
)

__all__ = [
    "DEFAULT_PATH",
    "JOB_STATES",
    "JOB_TRANSITIONS",
    "STORE_ENV",
    "TERMINAL_STATES",
    "AttemptRecord",
    "CandidateRecord",
    "CheckpointRecord",
    "EvaluationFilter",
    "EvaluationRecord",
    "IllegalTransition",
    "JobFilter",
    "JobRecord",
    "JobState",
    "MemoryStore",
    "NewJob",
    "NotFound",
    "OwnershipLost",
    "Page",
    "PostgresStore",
    "ResourceRecord",
    "RolloutFilter",
    "RolloutRecord",
    "SQLiteStore",
    "SchemaError",
    "SpanFilter",
    "SpanRecord",
    "StepWrite",
    "Store",
    "SystemRecord",
    "WorkerRecord",
    "open_store",
]
