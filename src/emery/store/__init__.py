"""Durable state: jobs, events, checkpoints, candidates, evaluations, rollouts and spans.

``open_store()`` gives the default SQLite file store (``./.emery/emery.db``);
``MemoryStore`` is for tests and ``PostgresStore`` for several machines."""

from __future__ import annotations

from typing import TYPE_CHECKING

from emery.core.lazy import lazy_exports

if TYPE_CHECKING:
    from emery.core.errors import IllegalTransition
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
        SpanFilter,
        StepWrite,
        SystemRecord,
        WorkerRecord,
    )
    from emery.store.states import (
        JOB_STATES,
        JOB_TRANSITIONS,
        TERMINAL_STATES,
        JobState,
        NotFound,
        OwnershipLost,
    )

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "DEFAULT_PATH": "emery.store.backends",
        "STORE_ENV": "emery.store.backends",
        "MemoryStore": "emery.store.backends",
        "PostgresStore": "emery.store.backends",
        "SQLiteStore": "emery.store.backends",
        "open_store": "emery.store.backends",
        "SchemaError": "emery.store.migrate",
        "Store": "emery.store.protocol",
        "CandidateRecord": "emery.store.records",
        "CheckpointRecord": "emery.store.records",
        "EvaluationFilter": "emery.store.records",
        "EvaluationRecord": "emery.store.records",
        "JobFilter": "emery.store.records",
        "JobRecord": "emery.store.records",
        "NewJob": "emery.store.records",
        "Page": "emery.store.records",
        "ResourceRecord": "emery.store.records",
        "RolloutFilter": "emery.store.records",
        "SpanFilter": "emery.store.records",
        "StepWrite": "emery.store.records",
        "SystemRecord": "emery.store.records",
        "WorkerRecord": "emery.store.records",
        "OwnershipLost": "emery.store.states",
        "JOB_STATES": "emery.store.states",
        "JOB_TRANSITIONS": "emery.store.states",
        "TERMINAL_STATES": "emery.store.states",
        "IllegalTransition": "emery.core.errors",
        "JobState": "emery.store.states",
        "NotFound": "emery.store.states",
    },
)

__all__ = [
    "DEFAULT_PATH",
    "JOB_STATES",
    "JOB_TRANSITIONS",
    "STORE_ENV",
    "TERMINAL_STATES",
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
    "SQLiteStore",
    "SchemaError",
    "SpanFilter",
    "StepWrite",
    "Store",
    "SystemRecord",
    "WorkerRecord",
    "open_store",
]
