"""The fault-injection table (issue 50, item 5): the storage and fleet faults of items 2
and 3, each run with scripted models, and one table of what happened, read from the store.

    .venv/bin/python benchmarks/reliability/fault_table.py            # every row, minutes
    .venv/bin/python benchmarks/reliability/fault_table.py -k postgres --json out.json

Each row runs the fault the way its unit test does, by calling that test function (from
``tests/unit``, put on ``sys.path`` here, as the tests' own fixtures would) with a folder
and, for PostgreSQL, a throwaway server of ``test_postgres_restart.Postgres`` (skipped
with a reason without the PostgreSQL binaries), and keeps the store it leaves. The skewed
clocks have only a store-level unit test (``test_queue_clock.py``), so their row runs a
whole job: two ``emery runner`` processes on PostgreSQL whose ``time.time`` is 5 minutes
behind and 5 minutes ahead; a control row runs them on SQLite, whose queue uses each
process's own clock, to show that the table sees the skew where nothing corrects it
(leases expire). Then, from the store, for the faulted job:

- outcome: whether the test's checks passed, the job's final state, how often it was
  started and paused (its events), and the leases that expired (attempts ``unresponsive``);
- steps lost: steps (checkpoint iterations) of an uninterrupted run of the same config
  (run here in memory, with the local executor) that the faulted job never stored, and
  steps stored twice;
- rollouts scored twice: results counted twice: rollouts with more than one attempt that
  ended ``succeeded`` (a late result taken beside its rerun's), and (candidate, example,
  split) keys with more than one stored evaluation (the store's unique key on evaluations
  makes this part 0 within one scope);
- rollouts run again: scored rollout rows beyond the uninterrupted run's per key (work
  done again and counted once, e.g. the runs of a step whose commit failed, redone by the
  resumed job);
- same result: state, best candidate and scores, every stored evaluation's score equal to
  the uninterrupted run's.

Exits 1 when a row's test failed, a step was lost, a rollout was scored twice or a result
differs, or when the control row shows no lease expired.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "unit"))

import jobs_support as js  # noqa: E402
import pytest  # noqa: E402
import runners_support as rs  # noqa: E402

from emery.config import parse_config  # noqa: E402
from emery.core.events import CheckpointSaved  # noqa: E402
from emery.jobs import create_job, run_job  # noqa: E402
from emery.store import MemoryStore, PostgresStore, RolloutFilter, SQLiteStore  # noqa: E402
from emery.store.sql import SqlStore  # noqa: E402

SKEW_S = 300.0


@dataclass
class Row:
    """One fault and what the store says about it."""

    fault: str
    where: str
    outcome: str = ""
    steps_lost: int | None = None
    steps_twice: int | None = None
    scored_twice: int | None = None
    run_again: int | None = None
    same_result: bool | None = None
    seconds: float = 0.0
    skipped: str | None = None
    leases_expired: int | None = None
    control: bool = False
    """A control row shows what the table would show of a fault the code does not
    handle: it is bad when it shows nothing (no lease expired)."""

    @property
    def bad(self) -> bool:
        if self.control:
            return self.skipped is None and not self.leases_expired
        return self.skipped is None and (
            self.outcome.startswith("test failed")
            or bool(self.steps_lost or self.steps_twice or self.scored_twice)
            or self.same_result is not True
        )


# --- what the store says --------------------------------------------------------------------


def checkpoints(store: SqlStore, job_id: str) -> list[int]:
    """The iteration of every stored checkpoint of the job, in order."""
    kind = CheckpointSaved.kind
    return [int(e.data["iteration"]) for e in store.list_events(job_id) if e.kind == kind]


def scored_keys(store: SqlStore, job_id: str) -> Counter[tuple[str, str, str]]:
    """(candidate, example, split) of every scored rollout of the job."""
    rollouts = store.list_rollouts(RolloutFilter(job_id=job_id), limit=None).items
    return Counter(
        (str(r.candidate_id), str(r.example_id), str(r.split))
        for r in rollouts
        if r.score is not None
    )


def summary(store: SqlStore, job_id: str) -> dict[str, Any]:
    """What a faulted run must share with an uninterrupted one."""
    job = store.get_job(job_id)
    result = job.result or {}
    return {
        "state": job.state,
        "best": (job.best_candidate_id, job.best_score, job.baseline_score),
        "result": {k: result.get(k) for k in ("best_test", "baseline_test", "best_val")},
        "scores": js.stored_scores(store, job_id),
    }


def uninterrupted(job_config: dict[str, Any], folder: Path) -> tuple[MemoryStore, str]:
    """The same config run to its end in memory, rollouts here (local executor)."""
    config = json.loads(json.dumps(job_config))
    config.setdefault("runtime", {})["executor"] = "local"
    config["runtime"]["workdir"] = str(folder / "reference" / ".emery")
    config["runtime"].pop("lease_s", None)
    store = MemoryStore()
    job = run_job(store, create_job(store, parse_config(config), base_dir=folder).id)
    return store, job.id


def read_back(row: Row, store: SqlStore, folder: Path, verdict: str) -> None:
    """Fill ``row`` from the store's one job and an uninterrupted run of its config."""
    jobs = store.list_jobs(limit=None).items
    if len(jobs) != 1:
        row.outcome = f"{verdict}; {len(jobs)} jobs in the store, expected one"
        return
    job = jobs[0]
    reference, reference_id = uninterrupted(job.config, folder)
    got, expected = checkpoints(store, job.id), checkpoints(reference, reference_id)
    row.steps_lost = len(set(expected) - set(got))
    row.steps_twice = len(got) - len(set(got))
    evaluations = Counter(s[:3] for s in js.stored_scores(store, job.id))
    rollouts = store.list_rollouts(RolloutFilter(job_id=job.id), limit=None).items
    attempts = {r.id: store.list_attempts(r.id) for r in rollouts}
    late = sum(
        max(0, sum(a.status == "succeeded" for a in tried) - 1) for tried in attempts.values()
    )
    row.scored_twice = late + sum(count - 1 for count in evaluations.values() if count > 1)
    ran, once = scored_keys(store, job.id), scored_keys(reference, reference_id)
    row.run_again = sum(max(0, n - max(1, once[key])) for key, n in ran.items())
    row.same_result = summary(store, job.id) == summary(reference, reference_id)
    kinds = Counter(e.kind for e in store.list_events(job.id))
    expired = sum(a.status == "unresponsive" for tried in attempts.values() for a in tried)
    row.leases_expired = expired
    row.outcome = (
        f"{verdict}; {job.state}, paused {kinds['paused']}x, resumed {kinds['resumed']}x,"
        f" {expired} lease(s) expired"
    )


def run_test(test: Callable[..., None], *args: Any) -> str:
    """Call a unit test's function: 'test passed' or 'test failed: its first line'."""
    try:
        test(*args)
    except AssertionError as error:
        first = (str(error).strip().splitlines() or [repr(error)])[0]
        return f"test failed: {first[:120]}"
    return "test passed"


# --- the rows -------------------------------------------------------------------------------


def full_disk(fault: str) -> Callable[[Path], tuple[str, SqlStore]]:
    def run(folder: Path) -> tuple[str, SqlStore]:
        import test_store_full as full

        raise_fault = {"oserror": full._raise_os, "sqlite": full._raise_sqlite}[fault]
        verdict = run_test(
            full.test_a_full_disk_at_a_step_pauses_the_job_and_a_resume_ends_as_an_uninterrupted_run,
            folder,
            raise_fault,
        )
        return verdict, SQLiteStore(folder / "emery.db")

    return run


def real_sqlite_full(folder: Path) -> tuple[str, SqlStore]:
    import test_store_full as full

    verdict = run_test(
        full.test_sqlite_refusing_to_grow_the_file_stops_the_run_with_one_line_and_a_resume_finishes_it,
        folder,
    )
    return verdict, SQLiteStore(folder / "emery.db")


def server_killed(folder: Path) -> tuple[str, SqlStore]:
    import test_fleet_faults as fleet

    verdict = run_test(fleet.test_the_server_killed_under_its_runners_and_restarted, folder)
    return verdict, SQLiteStore(folder / "runners.db")


def runner_frozen(folder: Path) -> tuple[str, SqlStore]:
    import test_fleet_faults as fleet

    verdict = run_test(fleet.test_a_runner_frozen_past_its_lease_is_not_counted_twice, folder)
    return verdict, SQLiteStore(folder / "runners.db")


class PostgresRows:
    """The rows on a throwaway PostgreSQL server (``test_postgres_restart.Postgres``)."""

    def __init__(self) -> None:
        self.server: Any = None
        self.reason: str | None = None
        try:
            import test_postgres_restart as pg
        except pytest.skip.Exception as skipped:  # importorskip: psycopg missing
            self.reason = str(skipped)
            return
        bin_dir = pg._bin()
        if bin_dir is None:
            self.reason = "the PostgreSQL binaries (initdb, pg_ctl) are not installed"
            return
        self.pg = pg
        self.bin_dir = bin_dir

    def fresh(self) -> SqlStore:
        """A new server (its own folder and port), started; a store on it."""
        self.close()
        self.server = self.pg.Postgres(self.bin_dir)
        self.server.start()
        return PostgresStore(self.server.url)

    def close(self) -> None:
        if self.server is not None:
            self.server.remove()
            self.server = None

    def mid_job(self, folder: Path) -> tuple[str, SqlStore]:
        store = self.fresh()
        patch = pytest.MonkeyPatch()
        try:
            verdict = run_test(
                self.pg.test_a_job_goes_on_through_a_postgresql_restart_with_every_step_stored_once,
                self.server,
                store,
                folder,
                patch,
            )
        finally:
            patch.undo()
        return verdict, store

    def mid_claims(self, folder: Path) -> tuple[str, SqlStore]:
        store = self.fresh()
        verdict = run_test(
            self.pg.test_a_runners_job_and_its_runner_go_on_through_a_postgresql_restart,
            self.server,
            store,
            folder,
        )
        return verdict, store

    def skewed_clocks(self, folder: Path) -> tuple[str, SqlStore]:
        """Two runners' clocks 5 minutes apart on PostgreSQL (``skewed_job``)."""
        store = self.fresh()
        return skewed_job(store, self.server.url, folder), store


def skewed_job(store: SqlStore, url: str, folder: Path) -> str:
    """A runners job (lease 10 s) on ``store`` at ``url`` whose two runner processes'
    clocks are 5 minutes behind and 5 minutes ahead of the job's: by the runners' own
    clocks every lease would be expired at once (or 10 minutes long). The verdict."""
    config = rs.runners_config(folder / "r", iterations=3, lease_s=10.0)
    job_id = rs.new_job(store, folder / "r", config)
    runners = [skewed_runner(url, offset) for offset in (-SKEW_S, SKEW_S)]
    job = rs.start_job(job_id, url)
    try:
        js.wait_until(lambda: store.get_job(job_id).terminal, timeout=300, poll=0.2)
        code = job.wait(timeout=60)
        alive = all(r.poll() is None for r in runners)
    finally:
        rs.stop([job, *runners])
    workers = {
        attempt.worker_id
        for rollout in store.list_rollouts(RolloutFilter(job_id=job_id), limit=None).items
        for attempt in store.list_attempts(rollout.id)
    }
    checks = []
    if code != 0:
        checks.append(f"the job's process exited {code}")
    if not alive:
        checks.append("a runner died")
    if len(workers) != 2:
        checks.append(f"{len(workers)} runner(s) ran rollouts, expected both")
    return "checks passed" if not checks else f"test failed: {'; '.join(checks)}"


def skewed_clocks_on_sqlite(folder: Path) -> tuple[str, SqlStore]:
    """The control: the same job on SQLite, whose queue stamps leases with each
    process's own clock (one machine: the skew is injected, no deployment has it)."""
    path = folder / "skewed.db"
    store = SQLiteStore(path)
    return skewed_job(store, str(path), folder), store


SKEWED_RUNNER = (
    "import sys, time; real = time.time; offset = float(sys.argv[2]);"
    " time.time = lambda: real() + offset;"
    " from emery.cli.app import main;"
    " main(['runner', '--store', sys.argv[1], '--poll-s', '0.05'])"
)


def skewed_runner(url: str, offset_s: float) -> subprocess.Popen[bytes]:
    """``emery runner`` whose ``time.time`` is ``offset_s`` off (set before emery loads)."""
    return subprocess.Popen(
        [sys.executable, "-c", SKEWED_RUNNER, url, str(offset_s)],
        env=js.worker_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def rows(postgres: PostgresRows) -> list[tuple[Row, Callable[[Path], tuple[str, SqlStore]] | None]]:
    pg = postgres.reason is None
    skip = None if pg else postgres.reason

    def on_pg(row: Row, run: Callable[[Path], tuple[str, SqlStore]]) -> tuple[Row, Any]:
        row.skipped = skip
        return row, (run if pg else None)

    return [
        (
            Row(
                "disk full (OSError ENOSPC)",
                "SQLite: the commit of step 2 (commit_step raises until the block ends)",
            ),
            full_disk("oserror"),
        ),
        (
            Row(
                "disk full (sqlite3 'database or disk is full')",
                "SQLite: the commit of step 2 (commit_step raises until the block ends)",
            ),
            full_disk("sqlite"),
        ),
        (
            Row(
                "disk full (real SQLITE_FULL, max_page_count)",
                "SQLite: the file may not grow from step 2's commit; the pause cannot be"
                " written either",
            ),
            real_sqlite_full,
        ),
        on_pg(
            Row(
                "PostgreSQL stopped 2 s and started again",
                "mid-job, after the first checkpoint (pg_ctl stop -m immediate)",
            ),
            postgres.mid_job if pg else _unused,
        ),
        on_pg(
            Row(
                "PostgreSQL stopped 2 s and started again",
                "mid-runner claims (one runner process, executor runners)",
            ),
            postgres.mid_claims if pg else _unused,
        ),
        (
            Row(
                "server SIGKILLed and restarted",
                "emery server under two runners over HTTP, once a rollout is running",
            ),
            server_killed,
        ),
        (
            Row(
                "runner SIGSTOPped past its lease, then SIGCONT",
                "a runner holding a rollout (lease 2 s); a second runner takes it over",
            ),
            runner_frozen,
        ),
        on_pg(
            Row(
                "two runners' clocks 5 min behind and ahead",
                "PostgreSQL queue, lease 10 s, time.time of each runner process skewed",
            ),
            postgres.skewed_clocks if pg else _unused,
        ),
        (
            Row(
                "(control) the same skewed runners on SQLite",
                "SQLite queue: leases by each process's own clock, so the skew bites"
                " (expected: leases expire, the result may differ)",
                control=True,
            ),
            skewed_clocks_on_sqlite,
        ),
    ]


def _unused(folder: Path) -> tuple[str, SqlStore]:
    raise AssertionError("a skipped row ran")


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    return str(value)


def table(done: list[Row]) -> str:
    lines = [
        "| fault | where injected | outcome | steps lost | rollouts scored twice |"
        " rollouts run again | same result as uninterrupted | s |",
        "| --- | --- | --- | ---: | ---: | ---: | --- | ---: |",
    ]
    for row in done:
        outcome = f"skipped: {row.skipped}" if row.skipped else row.outcome
        lost = cell(row.steps_lost)
        if row.steps_twice:
            lost += f" ({row.steps_twice} stored twice)"
        lines.append(
            f"| {row.fault} | {row.where} | {outcome} | {lost} | {cell(row.scored_twice)} |"
            f" {cell(row.run_again)} | {cell(row.same_result)} | {row.seconds:.0f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-k", help="only rows whose fault or place contains this (any case)")
    parser.add_argument("--json", type=Path, help="write the rows here")
    args = parser.parse_args()
    js.register_random_search()  # the tests' fixture: their configs' algorithm
    os.environ.pop("EMERY_STORE", None)
    postgres = PostgresRows()
    done: list[Row] = []
    try:
        for row, run in rows(postgres):
            if args.k and args.k.lower() not in f"{row.fault} {row.where}".lower():
                continue
            if row.skipped is None and run is not None:
                folder = Path(tempfile.mkdtemp(prefix="emery-fault-"))
                began = time.monotonic()
                try:
                    verdict, store = run(folder)
                    read_back(row, store, folder, verdict)
                    if row.control:  # its checks are meant to fail
                        row.outcome = row.outcome.replace("test failed: ", "as expected: ", 1)
                    store.close()
                except Exception as error:  # a crash is a row's outcome, not the table's end
                    traceback.print_exc()
                    row.outcome = f"test failed: {type(error).__name__}: {error}"[:160]
                finally:
                    row.seconds = time.monotonic() - began
                    shutil.rmtree(folder, ignore_errors=True)
            print(f"{row.fault} | {row.where}: {row.skipped or row.outcome}", flush=True)
            done.append(row)
    finally:
        postgres.close()
    load = os.getloadavg()
    print()
    print(table(done))
    print(f"\n1-min load at the end: {load[0]:.1f}")
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in done], indent=2))
    sys.exit(1 if any(r.bad for r in done) else 0)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # clean up PostgreSQL
    main()
