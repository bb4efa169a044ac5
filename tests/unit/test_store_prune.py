"""Retention: ``Store.prune`` and ``emery store prune`` delete the spans, rollouts and
attempts of old finished jobs (and, when asked, old application traces), keep everything
else, and give the space back (SQLite: VACUUM)."""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from bad_input_support import one_error_line, run_cli, store_jobs
from server_support import finished_job, job_config, random_search_module
from sqlalchemy import update
from store_fixtures import BACKENDS, make_store

from emery.config import parse_config
from emery.core.approvals import Approval
from emery.core.models import Candidate
from emery.core.rollouts import Attempt, Rollout, RolloutConfig
from emery.core.spans import SpanRecord
from emery.jobs import create_job, run_job
from emery.reports import published
from emery.reports.served import ServedSystem
from emery.store import NewJob, SQLiteStore
from emery.store import schema as t
from emery.store.records import EvaluationFilter, PruneCounts, RolloutFilter, SpanFilter
from emery.store.sql import SqlStore

__all__ = ["random_search_module"]

DAY = 86_400.0
QUESTION = "Tom has 3 boxes with 4 apples in each box. How many apples does Tom have?"
PATHS = {
    "queued": ["queued"],
    "running": ["queued", "running"],
    "paused": ["queued", "running", "paused"],
    "succeeded": ["queued", "running", "succeeded"],
    "failed": ["failed"],
    "cancelled": ["cancelled"],
}


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SqlStore]:
    yield from make_store(request.param, tmp_path)


def age(store: SqlStore, job_id: str, days: float) -> None:
    """Make the job look last updated ``days`` ago."""
    with store.engine.begin() as conn:
        conn.execute(
            update(t.jobs).where(t.jobs.c.id == job_id).values(updated_at=time.time() - days * DAY)
        )


def traced_job(
    store: SqlStore, job_id: str, state: str, *, days: float, rollouts: int = 2, pad: int = 0
) -> str:
    """A job in ``state`` last updated ``days`` ago, with a candidate, an event and
    ``rollouts`` rollouts of one attempt and two spans each (attributes ``pad`` chars)."""
    store.create_job(
        NewJob(id=job_id, name=job_id, algorithm="gepa", config={"dataset": {"task": "x"}})
    )
    for target in PATHS[state]:
        store.transition(job_id, target)
    store.add_candidates(job_id, [Candidate(components={"instruction": f"{job_id} text"})])
    config = RolloutConfig(max_attempts=1)
    made = [
        Rollout(id=f"{job_id}-r{n}", job_id=job_id, example_id=f"e{n}", config=config)
        for n in range(rollouts)
    ]
    attempts = [Attempt(rollout_id=r.id, number=1) for r in made]
    spans = [
        span(f"{n:02d}{k}", trace=f"{job_id}-r{n}", job_id=job_id, rollout_id=r.id, pad=pad)
        for n, r in enumerate(made)
        for k in range(2)
    ]
    for s, a in zip(spans, [a for a in attempts for _ in range(2)], strict=True):
        s.attempt_id = a.id
    store.add_traces(made, attempts, spans)
    age(store, job_id, days)
    return job_id


def span(
    span_id: str,
    *,
    trace: str,
    days: float = 0.0,
    pad: int = 0,
    **fields: object,
) -> SpanRecord:
    started = datetime.now(UTC) - timedelta(days=days)
    return SpanRecord.model_validate(
        {
            "trace_id": hashlib.md5(trace.encode()).hexdigest(),
            "span_id": hashlib.md5(span_id.encode()).hexdigest()[:16],
            "name": "chat",
            "start_time": started,
            "end_time": started + timedelta(seconds=1),
            "attributes": {"padding": "x" * pad},
            **fields,
        }
    )


def trace_rows(store: SqlStore, job_id: str) -> tuple[int, int, int]:
    """(spans, rollouts, attempts) the store holds of a job."""
    rollouts = store.list_rollouts(RolloutFilter(job_id=job_id), limit=None).items
    attempts = sum(len(store.list_attempts(r.id)) for r in rollouts)
    return store.list_spans(SpanFilter(job_id=job_id), limit=None).total, len(rollouts), attempts


def test_old_finished_jobs_lose_their_traces_and_nothing_else(store: SqlStore) -> None:
    for state in ("succeeded", "failed", "cancelled"):
        traced_job(store, f"old-{state}", state, days=40)
    for state in ("queued", "running", "paused"):
        traced_job(store, f"live-{state}", state, days=40)
    traced_job(store, "recent", "succeeded", days=5)
    before = datetime.now(UTC) - timedelta(days=30)

    counts = store.prune(before)

    assert (counts.jobs, counts.spans, counts.rollouts, counts.attempts) == (3, 12, 6, 6)
    assert counts.app_spans == counts.kept_jobs == 0
    for state in ("succeeded", "failed", "cancelled"):
        job_id = f"old-{state}"
        assert trace_rows(store, job_id) == (0, 0, 0)
        assert store.get_job(job_id).state == state  # the job row, candidates, events stay
        assert len(store.job_candidates(job_id)) == 1
        assert store.list_events(job_id)
    for job_id in ("live-queued", "live-running", "live-paused", "recent"):
        assert trace_rows(store, job_id) == (4, 2, 2), job_id
    again = store.prune(before)  # nothing left to prune: no job counted twice
    assert (again.jobs, again.rows) == (0, 0)


def test_a_dry_run_counts_the_same_and_deletes_nothing(store: SqlStore) -> None:
    traced_job(store, "old", "succeeded", days=40)
    traced_job(store, "running", "running", days=40)
    store.add_spans([span("app1", trace="app", days=40)])
    before = datetime.now(UTC) - timedelta(days=30)

    dry = store.prune(before, app_traces=True, dry_run=True)

    assert dry.dry_run
    assert dry.bytes_after is None
    assert (dry.jobs, dry.spans, dry.rollouts, dry.attempts, dry.app_spans) == (1, 4, 2, 2, 1)
    assert trace_rows(store, "old") == (4, 2, 2)
    assert store.list_spans(SpanFilter(job_id=None)).total == 9
    real = store.prune(before, app_traces=True)
    assert real.model_dump(exclude={"dry_run", "bytes_before", "bytes_after"}) == dry.model_dump(
        exclude={"dry_run", "bytes_before", "bytes_after"}
    )


def test_application_traces_stay_unless_asked_and_go_by_whole_trace(store: SqlStore) -> None:
    store.add_spans(
        [
            span("a1", trace="old-trace", days=40),
            span("a2", trace="old-trace", days=39),
            span("b1", trace="straddles", days=40),
            span("b2", trace="straddles", days=1),  # its newest span is recent: kept whole
            span("c1", trace="recent", days=2),
        ]
    )
    before = datetime.now(UTC) - timedelta(days=30)

    assert store.prune(before).app_spans == 0
    assert store.list_spans().total == 5
    counts = store.prune(before, app_traces=True)

    assert counts.app_spans == 2
    left = {s.span_id for s in store.list_spans(limit=None).items}
    assert left == {span(n, trace="x").span_id for n in ("b1", "b2", "c1")}


def test_a_published_prompts_job_and_one_awaiting_approval_are_kept_whole(
    store: SqlStore,
) -> None:
    traced_job(store, "published", "succeeded", days=40)
    traced_job(store, "asking", "succeeded", days=40)
    traced_job(store, "decided", "succeeded", days=40)
    traced_job(store, "other", "succeeded", days=40)
    store.put_resource("prompt:bot", {"job_id": "published"}, kind="prompt", job_id="published")
    store.put_resource("candidate:abc", {}, kind="candidate", job_id="other")  # not lineage
    for job_id, status in (("asking", "pending"), ("decided", "rejected")):
        store.add_approval(
            Approval(id=f"ap-{job_id}", job_id=job_id, kind="publish", candidate_id="c")
        )
        if status != "pending":
            store.decide_approval(f"ap-{job_id}", "reject", reason="no")

    counts = store.prune(datetime.now(UTC) - timedelta(days=30))

    assert (counts.jobs, counts.kept_jobs) == (2, 2)
    assert trace_rows(store, "published") == trace_rows(store, "asking") == (4, 2, 2)
    assert trace_rows(store, "decided") == trace_rows(store, "other") == (0, 0, 0)


def test_vacuum_shrinks_the_sqlite_file(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "emery.db")
    traced_job(store, "bulky", "succeeded", days=40, rollouts=50, pad=4000)
    traced_job(store, "small", "succeeded", days=1)
    counts = store.prune(datetime.now(UTC) - timedelta(days=30))
    size = (tmp_path / "emery.db").stat().st_size
    store.close()

    assert counts.spans == 100
    assert counts.bytes_before is not None
    assert counts.bytes_after is not None
    assert counts.bytes_freed is not None
    assert counts.bytes_freed > 100 * 4000
    assert size == counts.bytes_after  # the WAL was truncated into the file
    assert isinstance(counts, PruneCounts)


# --- a real job, published, through the command line -----------------------------------


@dataclass
class Stores:
    path: Path
    published_job: str
    other_job: str
    running_job: str


@pytest.fixture
def stores(random_search_module: None, tmp_path: Path) -> Stores:
    """A SQLite file with two succeeded scripted jobs (one published as ``bot``) and a
    running one, all last updated 40 days ago."""
    path = tmp_path / "emery.db"
    store = SQLiteStore(path)
    first = finished_job(store, tmp_path)  # type: ignore[arg-type]  # any store will do
    config = job_config(tmp_path, iterations=2)
    config["verifier"]["abs_tol"] = 1e-3  # another scope: the job pays for its own rollouts
    second = create_job(store, parse_config(config), given=config, base_dir=tmp_path).id
    assert run_job(store, second).state == "succeeded"
    published.publish(store, first, "bot")
    running = traced_job(store, "running", "running", days=40, rollouts=3)
    for job_id in (first, second, running):
        age(store, job_id, 40)
    store.close()
    return Stores(path, first, second, running)


def snapshot(store: SqlStore, job_id: str) -> tuple[int, int, int, tuple[int, int, int]]:
    """(candidates, evaluations, events, trace rows) of a job."""
    evaluations = store.list_evaluations(EvaluationFilter(job_id=job_id), limit=None).total
    return (
        len(store.job_candidates(job_id)),
        evaluations,
        len(store.list_events(job_id)),
        trace_rows(store, job_id),
    )


def test_the_command_prunes_and_a_published_prompt_is_still_shown_and_served(
    stores: Stores, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(stores.path)
    store = SQLiteStore(stores.path)
    kept = {job: snapshot(store, job) for job in (stores.published_job, stores.running_job)}
    other = snapshot(store, stores.other_job)
    store.close()
    assert other[3][0] > 0
    assert other[3][1] > 0

    assert run_cli(["store", "prune", "--older-than", "30", "--dry-run", "--store", db]) == 0
    said = capsys.readouterr().out
    assert "would delete the traces of 1 finished job(s)" in said
    assert f"{other[3][0]} spans, {other[3][1]} rollouts" in said
    store = SQLiteStore(stores.path)
    assert snapshot(store, stores.other_job) == other
    store.close()

    assert run_cli(["store", "prune", "--older-than", "30", "--store", db]) == 0
    said = capsys.readouterr().out
    assert "deleted the traces of 1 finished job(s)" in said
    assert "kept 1 old job(s) whole" in said
    assert "freed)" in said

    store = SQLiteStore(stores.path)
    assert snapshot(store, stores.other_job) == (*other[:3], (0, 0, 0))
    for job_id, before in kept.items():
        assert snapshot(store, job_id) == before
    prompt = published.show(store, "bot")
    served = ServedSystem.of(prompt, store)
    answer = asyncio.run(served.run({"question": QUESTION}))
    assert answer.error is None
    store.close()
    assert run_cli(["prompts", "show", "bot", "--store", db]) == 0
    assert run_cli(["report", stores.other_job, "--store", db]) == 0
    assert run_cli(["candidates", stores.other_job, "--store", db]) == 0


@pytest.mark.parametrize(
    ("days", "message"),
    [("-1", "--older-than is a number of days, 0 or more, not -1"), ("nan", "not nan")],
)
def test_a_bad_age_is_one_line_and_loses_nothing(
    stores: Stores, days: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    jobs = store_jobs(stores.path)
    store = SQLiteStore(stores.path)
    before = snapshot(store, stores.other_job)
    store.close()

    code = run_cli(["store", "prune", "--older-than", days, "--store", str(stores.path)])

    assert code != 0
    assert message in one_error_line(capsys.readouterr().err)
    assert store_jobs(stores.path) == jobs
    store = SQLiteStore(stores.path)
    assert snapshot(store, stores.other_job) == before
    store.close()


def test_a_store_that_does_not_exist_is_one_line_and_not_made(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nowhere" / "emery.db"

    code = run_cli(["store", "prune", "--older-than", "30", "--store", str(missing)])

    assert code != 0
    assert f"no store at {missing}" in one_error_line(capsys.readouterr().err)
    assert not missing.exists()
    assert not missing.parent.exists()
