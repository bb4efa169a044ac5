"""The store's tables (SQLAlchemy Core), shared by SQLite, PostgreSQL and the in-memory store.

Timestamps are UNIX seconds (floats) so that every backend compares and sorts them alike.
JSON columns hold pydantic dumps (``mode="json"``).
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    Column,
    Float,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
)

SCHEMA_VERSION = 2

metadata = MetaData()

meta = Table(
    "emery_meta",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)

systems = Table(
    "systems",
    metadata,
    Column("id", String(64), primary_key=True),  # name + version hash
    Column("name", String(200), nullable=False),
    Column("kind", String(64), nullable=False),
    Column("version", String(64), nullable=False),
    Column("config", JSON, nullable=True),
    Column("created_at", Float, nullable=False),
    Index("ix_systems_name", "name"),
)

jobs = Table(
    "jobs",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("name", String(200), nullable=False),
    Column("kind", String(16), nullable=False),  # optimize | eval
    Column("algorithm", String(64), nullable=False),
    Column("system_id", String(64), nullable=True),
    Column("system_name", String(200), nullable=True),
    Column("state", String(16), nullable=False),
    Column("requested_action", String(16), nullable=True),  # pause | cancel
    Column("config", JSON, nullable=False),  # as given
    Column("resolved_config", JSON, nullable=True),  # with every default filled in
    Column("config_hash", String(64), nullable=False),
    Column("config_path", Text, nullable=True),
    Column("base_dir", Text, nullable=True),
    Column("metadata", JSON, nullable=False),
    Column("eval_scope", String(64), nullable=True),
    Column("owner", String(200), nullable=True),  # host:pid of the running engine
    Column("heartbeat_at", Float, nullable=True),
    Column("last_seq", Integer, nullable=False, default=0),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    Column("started_at", Float, nullable=True),
    Column("finished_at", Float, nullable=True),
    Column("best_candidate_id", String(64), nullable=True),
    Column("best_score", Float, nullable=True),
    Column("baseline_score", Float, nullable=True),
    Column("stop_reason", Text, nullable=True),
    Column("error", Text, nullable=True),
    Column("result", JSON, nullable=True),
    Index("ix_jobs_state", "state"),
    Index("ix_jobs_system", "system_name"),
    Index("ix_jobs_created", "created_at"),
    Index("ix_jobs_config_hash", "config_hash"),
)

job_events = Table(
    "job_events",
    metadata,
    Column("job_id", String(40), nullable=False),
    Column("seq", Integer, nullable=False),
    Column("kind", String(64), nullable=False),
    Column("data", JSON, nullable=False),
    Column("at", Float, nullable=False),
    PrimaryKeyConstraint("job_id", "seq"),
)

checkpoints = Table(
    "checkpoints",
    metadata,
    Column("job_id", String(40), primary_key=True),  # only the latest is kept
    Column("number", Integer, nullable=False),  # completed iterations when it was taken
    Column("state", JSON, nullable=False),
    Column("budget", JSON, nullable=False),
    Column("usage", JSON, nullable=False),
    Column("created_at", Float, nullable=False),
)

candidates = Table(
    "candidates",
    metadata,
    Column("job_id", String(40), nullable=False),
    Column("candidate_id", String(64), nullable=False),
    Column("ordinal", Integer, nullable=False),  # order of creation within the job
    Column("components", JSON, nullable=False),
    Column("demos", JSON, nullable=False),
    Column("parents", JSON, nullable=False),
    Column("generation", Integer, nullable=False),
    Column("operation", String(64), nullable=False),
    Column("iteration", Integer, nullable=True),
    Column("details", JSON, nullable=False),
    Column("created_at", Float, nullable=False),
    PrimaryKeyConstraint("job_id", "candidate_id"),
)

evaluations = Table(
    "evaluations",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("scope", String(64), nullable=False),
    Column("candidate_id", String(64), nullable=False),
    Column("example_id", String(200), nullable=False),
    Column("split", String(8), nullable=False),
    Column("example_hash", String(64), nullable=False),
    Column("job_id", String(40), nullable=True),  # the job that paid for it
    Column("rollout_id", String(64), nullable=True),
    Column("score", Float, nullable=False),
    Column("output", JSON, nullable=True),
    Column("feedback", Text, nullable=False),
    Column("error", Text, nullable=True),
    Column("calls", JSON, nullable=False),
    Column("usage", JSON, nullable=False),
    Column("lm_calls", Integer, nullable=False),
    Column("latency_s", Float, nullable=False),
    Column("extra", JSON, nullable=False),  # result fields without a column of their own
    Column("created_at", Float, nullable=False),
    # The example's content is part of the key: two datasets may give one id to different
    # examples, and each keeps its own results (schema 2; schema 1 keyed without it).
    UniqueConstraint(
        "scope", "candidate_id", "example_id", "split", "example_hash", name="uq_evaluation_key"
    ),
    Index("ix_evaluations_job", "job_id", "candidate_id"),
)

EVALUATION_KEY = ("scope", "candidate_id", "example_id", "split", "example_hash")

job_examples = Table(
    "job_examples",
    metadata,
    Column("job_id", String(40), nullable=False),
    Column("split", String(8), nullable=False),
    Column("example_id", String(200), nullable=False),
    Column("example_hash", String(64), nullable=False),
    PrimaryKeyConstraint("job_id", "split", "example_id"),
)
"""The examples of each job's dataset by content, so that a job's candidate scores count
only the stored evaluations of its own examples."""

rollouts = Table(
    "rollouts",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("job_id", String(40), nullable=True),
    Column("candidate_id", String(64), nullable=True),
    Column("example_id", String(200), nullable=True),
    Column("split", String(8), nullable=True),
    Column("mode", String(16), nullable=True),  # train | val | test | inference
    Column("status", String(16), nullable=False),
    Column("input", JSON, nullable=True),
    Column("output", JSON, nullable=True),
    Column("score", Float, nullable=True),
    Column("error", Text, nullable=True),
    Column("max_attempts", Integer, nullable=False),
    Column("retry_statuses", JSON, nullable=False),
    Column("timeout_seconds", Float, nullable=True),
    Column("unresponsive_seconds", Float, nullable=True),
    Column("attempt_count", Integer, nullable=False),
    Column("metadata", JSON, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("started_at", Float, nullable=True),
    Column("finished_at", Float, nullable=True),
    Index("ix_rollouts_job", "job_id", "status"),
    Index("ix_rollouts_candidate", "candidate_id"),
)

attempts = Table(
    "attempts",
    metadata,
    Column("id", String(80), primary_key=True),
    Column("rollout_id", String(64), nullable=False),
    Column("number", Integer, nullable=False),  # 1, 2, ...
    Column("status", String(16), nullable=False),
    Column("worker_id", String(200), nullable=True),
    Column("error", Text, nullable=True),
    Column("started_at", Float, nullable=False),
    Column("heartbeat_at", Float, nullable=True),
    Column("finished_at", Float, nullable=True),
    UniqueConstraint("rollout_id", "number", name="uq_attempt_number"),
)

spans = Table(
    "spans",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("trace_id", String(32), nullable=False),
    Column("span_id", String(16), nullable=False),
    Column("parent_id", String(16), nullable=True),
    Column("name", String(200), nullable=False),
    Column("kind", String(16), nullable=False),
    Column("start_time", Float, nullable=False),
    Column("end_time", Float, nullable=True),
    Column("attributes", JSON, nullable=False),
    Column("events", JSON, nullable=False),
    Column("status_code", String(8), nullable=False),  # UNSET | OK | ERROR
    Column("status_message", Text, nullable=True),
    Column("job_id", String(40), nullable=True),
    Column("rollout_id", String(64), nullable=True),
    Column("attempt_id", String(80), nullable=True),
    Column("seq", Integer, nullable=True),  # order within the attempt
    UniqueConstraint("trace_id", "span_id", name="uq_span"),
    Index("ix_spans_rollout", "rollout_id", "attempt_id", "seq"),
    Index("ix_spans_job", "job_id"),
)

resources = Table(
    "resources",
    metadata,
    Column("name", String(200), nullable=False),
    Column("version", Integer, nullable=False),
    Column("kind", String(64), nullable=False),
    Column("content", JSON, nullable=False),
    Column("job_id", String(40), nullable=True),
    Column("created_at", Float, nullable=False),
    PrimaryKeyConstraint("name", "version"),
)

feedback = Table(
    "feedback",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("trace_id", String(32), nullable=False),
    Column("span_id", String(16), nullable=True),  # None: about the whole trace
    Column("kind", String(16), nullable=False),  # score | thumb | reward
    Column("score", Float, nullable=False),  # in [0, 1]
    Column("raw", JSON, nullable=True),  # what was sent
    Column("comment", Text, nullable=True),
    Column("created_at", Float, nullable=False),
    Index("ix_feedback_trace", "trace_id", "span_id"),
)
"""Feedback on recorded traces (``POST /api/feedback``), read by ``emery dataset
from-traces`` as labels. A table added without a schema bump: ``ensure_schema`` creates
missing tables in older stores."""

idempotency_keys = Table(
    "idempotency_keys",
    metadata,
    Column("key", String(200), primary_key=True),
    Column("job_id", String(40), nullable=False),
    Column("request_hash", String(64), nullable=False),
    Column("created_at", Float, nullable=False),
)
"""The ``Idempotency-Key`` of each ``POST /api/jobs`` that sent one, and the job it made.
A table added without a schema bump (``ensure_schema`` creates missing tables)."""

workers = Table(
    "workers",
    metadata,
    Column("id", String(200), primary_key=True),
    Column("host", String(200), nullable=False),
    Column("pid", Integer, nullable=False),
    Column("status", String(16), nullable=False),  # idle | busy | stopped
    Column("job_id", String(40), nullable=True),
    Column("metadata", JSON, nullable=False),
    Column("started_at", Float, nullable=False),
    Column("heartbeat_at", Float, nullable=False),
)

approvals = Table(
    "approvals",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("job_id", String(40), nullable=False),
    Column("kind", String(16), nullable=False),  # best | publish
    Column("status", String(16), nullable=False),  # pending | approved | rejected | edited
    Column("candidate_id", String(64), nullable=False),
    Column("record", JSON, nullable=False),  # the whole emery.core.approvals.Approval
    Column("created_at", Float, nullable=False),
    Column("decided_at", Float, nullable=True),
    Index("ix_approvals_job", "job_id", "status"),
)
"""Requests for a person's decision (a table added without a schema bump: ``ensure_schema``
creates missing tables)."""

step_writes = Table(
    "step_writes",
    metadata,
    Column("job_id", String(40), primary_key=True),  # only the latest is kept
    Column("write_id", String(64), nullable=False),
    Column("first_seq", Integer, nullable=False),  # its events: first_seq..last_seq
    Column("last_seq", Integer, nullable=False),
    Column("at", Float, nullable=False),
)
"""The last ``commit_step`` of each job that carried a ``write_id``: the same write sent
again (its connection dropped at the commit) is recognized as stored, never stored twice.
A table added without a schema bump (``ensure_schema`` creates missing tables)."""
