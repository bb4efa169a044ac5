"""The fault table's figures are read from the store (``benchmarks/reliability/
fault_table.py``, run in full by ``make reliability-table``): a full disk's row, and a
store altered by hand so that a step is missing, a late result was taken and a rollout
was run again, each of which the row must show."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from bad_input_support import RELIABILITY

assert RELIABILITY.is_dir()

import fault_table  # noqa: E402

from emery.store import SQLiteStore  # noqa: E402

pytestmark = pytest.mark.usefixtures("random_search_algorithm")


def test_a_full_disk_row_and_what_it_would_show_of_a_lost_step_or_a_late_result(
    tmp_path: Path,
) -> None:
    clean = fault_table.Row("disk full", "step 2")
    verdict, store = fault_table.full_disk("oserror")(tmp_path)
    fault_table.read_back(clean, store, tmp_path, verdict)
    store.close()
    assert verdict == "test passed"
    assert clean.outcome.startswith("test passed; succeeded, paused 1x, resumed 1x")
    assert (clean.steps_lost, clean.steps_twice, clean.scored_twice) == (0, 0, 0)
    assert clean.same_result is True
    assert clean.run_again  # the cut step's runs, done again by the resumed job
    assert not clean.bad
    with sqlite3.connect(tmp_path / "emery.db") as conn:
        conn.execute(
            "DELETE FROM job_events WHERE kind = 'checkpoint_saved' AND seq ="
            " (SELECT max(seq) FROM job_events WHERE kind = 'checkpoint_saved')"
        )
        rollout = conn.execute("SELECT id FROM rollouts WHERE score IS NOT NULL").fetchone()[0]
        conn.execute(  # a second attempt of one rollout that also ended with a result
            "INSERT INTO attempts (id, rollout_id, number, status, worker_id, error, started_at,"
            " heartbeat_at, finished_at) SELECT rollout_id || ':' || (number + 1), rollout_id,"
            " number + 1, status,"
            " worker_id, error, started_at, heartbeat_at, finished_at FROM attempts"
            " WHERE rollout_id = ?",
            (rollout,),
        )
        columns = [r[1] for r in conn.execute("PRAGMA table_info(rollouts)")]
        copied = ", ".join("id || '-again'" if c == "id" else c for c in columns)
        conn.execute(
            f"INSERT INTO rollouts ({', '.join(columns)}) SELECT {copied} FROM rollouts"
            " WHERE id = ?",
            (rollout,),
        )
    row = fault_table.Row("disk full", "step 2")
    fault_table.read_back(row, SQLiteStore(tmp_path / "emery.db"), tmp_path, verdict)
    assert row.steps_lost == 1
    assert row.scored_twice == 1
    assert row.run_again == clean.run_again + 1
    assert row.bad
