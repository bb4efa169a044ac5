"""A job owner's heartbeat is aged by the store's clock (``JobRecord.heartbeat_age_s``),
not by the clock of the process that reads the row: a reader whose clock is minutes ahead
does not take a live job, and an owner that stopped beating is stale by the store's time."""

from __future__ import annotations

import time
from unittest.mock import patch

from test_store_queue import running_job

from emery.jobs.ownership import STALE_AFTER_S, is_stale, owner_alive
from emery.store import MemoryStore


def test_a_heartbeat_is_aged_by_the_store_not_the_reader() -> None:
    store = MemoryStore()
    at = [1_000_000.0]
    store.clock = lambda: at[0]
    job_id = running_job(store)
    store.swap_owner(job_id, "elsewhere:1", state="running", expect_owner=None)
    at[0] += 5.0
    job = store.get_job(job_id)
    assert job.heartbeat_age_s == 5.0
    with patch("emery.jobs.ownership.time.time", lambda: time.time() + 600):  # reader ahead
        assert owner_alive(job)
        assert not is_stale(job)
    at[0] += STALE_AFTER_S
    assert store.get_job(job_id).heartbeat_age_s == 5.0 + STALE_AFTER_S
    assert is_stale(store.get_job(job_id))  # no beat for longer than the stale age
    store.heartbeat(job_id, "elsewhere:1")
    assert not is_stale(store.get_job(job_id))
    assert store.list_jobs().items[0].heartbeat_age_s == 0.0
