"""A job's known results keep their memory bounded (issue 50, item 4: a 100,000-rollout
job's process grew 71 MiB per 10,000 rollouts, every result held): the newest ``keep`` in
memory, the rest read back from the store when asked, a result not stored yet never put
out; a job run so ends exactly as one that holds everything."""

from __future__ import annotations

from pathlib import Path

import jobs_support as js
import pytest

from emery.config import parse_config
from emery.core.example_result import ExampleResult
from emery.evaluation import known_results
from emery.evaluation.known_results import EvalKey, KnownResults
from emery.jobs import create_job, run_job
from emery.store import SQLiteStore


def result(n: int) -> ExampleResult:
    return ExampleResult(candidate_id="c", example_id=f"e{n}", split="val", score=n / 10)


def key(n: int) -> EvalKey:
    return ("c", f"e{n}", "val")


def test_the_newest_stay_in_memory_and_the_rest_are_read_back() -> None:
    stored = {key(n): result(n) for n in range(10)}
    reads: list[EvalKey] = []

    def load(wanted: EvalKey) -> ExampleResult | None:
        reads.append(wanted)
        return stored.get(wanted)

    known = KnownResults(stored, load=load, keep=3)
    assert (len(known), known.in_memory()) == (10, 3)
    assert known.get(key(0)) == result(0)  # out of memory: read back
    assert reads == [key(0)]
    assert known.get(key(0)) == result(0)  # now the newest: no read
    assert reads == [key(0)]
    assert known.get(("c", "nowhere", "val")) is None  # unknown keys cost no read
    assert reads == [key(0)]
    del stored[key(1)]  # pruned from the store meanwhile
    assert known.get(key(1)) is None
    assert key(1) not in known


def test_a_result_not_stored_yet_never_leaves_memory() -> None:
    known = KnownResults(load=lambda wanted: None, keep=2)
    for n in range(5):
        known.pin(key(n), result(n))
    assert known.in_memory() == 5  # all pinned: none can go
    known.unpin([key(0), key(1), key(2)])
    assert known.in_memory() == 2
    assert [known.get(key(n)) for n in (3, 4)] == [result(3), result(4)]


def test_without_a_store_every_result_stays() -> None:
    known = KnownResults({key(n): result(n) for n in range(50)}, keep=3)
    assert known.in_memory() == 50


@pytest.mark.usefixtures("random_search_algorithm")
def test_a_job_with_few_results_in_memory_ends_as_one_with_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def finished(folder: Path) -> list[tuple[object, ...]]:
        store = SQLiteStore(folder / "emery.db")
        config = parse_config(js.search_config(folder / ".emery", iterations=6))
        job = run_job(store, create_job(store, config, base_dir=folder).id)
        assert job.state == "succeeded", job.error
        return [(job.best_candidate_id, job.best_score), *js.stored_scores(store, job.id)]

    everything = finished(tmp_path / "all")
    monkeypatch.setattr(known_results, "KEEP", 2)
    assert finished(tmp_path / "two") == everything
