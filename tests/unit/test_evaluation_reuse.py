"""Evaluation reuse across jobs in one store: keyed by the example's content, so jobs on
different datasets that share example ids neither share results nor show each other's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sqlalchemy import MetaData, Table, UniqueConstraint, create_engine

from emery.config import parse_config
from emery.config.evaluation_scope import verifier_identity
from emery.core.example_result import ExampleResult
from emery.core.models import Candidate
from emery.jobs import create_job, run_job
from emery.reports import JobResult
from emery.store import MemoryStore, SQLiteStore
from emery.store import schema as t
from emery.store.records import EvaluationRecord
from emery.store.sql.candidates import evaluation_row
from emery.verifiers.function import FunctionMetric
from emery.verifiers.numeric import NumericMatch


def word_problems(path: Path, expected: int) -> Path:
    """Four val and two test questions, ids q0..q5; the fake task model answers 0."""
    rows = [
        {"id": f"q{i}", "question": f"What is {i} times {expected}?", "expected": expected}
        | {"split": "val" if i < 4 else "test"}
        for i in range(6)
    ]
    path.write_text("\n".join(json.dumps(row) for row in rows))
    return path


def config(data: Path, workdir: Path) -> dict[str, Any]:
    return {
        "job": {"algorithm": "baseline"},
        "dataset": {"path": str(data)},
        "system": {
            "kind": "prompt_program",
            "stages": [{"name": "solve", "messages": [{"template": "{question}"}]}],
        },
        "lm": {"task": {"model": "python/jobs_support:task_lm"}},
        "verifier": {"kind": "numeric"},
        "runtime": {"workdir": str(workdir)},
    }


def test_jobs_on_different_datasets_with_the_same_ids_keep_their_own_scores(
    tmp_path: Path,
) -> None:
    store = MemoryStore()
    right = config(word_problems(tmp_path / "zero.jsonl", 0), tmp_path / ".emery")
    wrong = config(word_problems(tmp_path / "five.jsonl", 5), tmp_path / ".emery")
    first = run_job(store, create_job(store, parse_config(right), base_dir=tmp_path).id)
    second = run_job(store, create_job(store, parse_config(wrong), base_dir=tmp_path).id)
    assert (first.baseline_score, second.baseline_score) == (1.0, 0.0)
    assert store.count_evaluations(second.id) == 6  # paid for, not shadowed by the first job
    for job, score in ((first, 1.0), (second, 0.0)):
        [seed] = store.list_candidates(job.id).items
        assert (seed.score, seed.n) == (score, 4)
        [row] = JobResult.model_validate(job.result).top_candidates
        assert (row.score, row.n) == (score, 4)
    rerun = run_job(store, create_job(store, parse_config(wrong), base_dir=tmp_path).id)
    assert store.count_evaluations(rerun.id) == 0  # the same dataset again: all reused


def test_an_overridden_verifier_is_told_apart_by_its_function_and_settings() -> None:
    def strict(example: Any, output: Any) -> float:
        return 1.0

    def lenient(example: Any, output: Any) -> float:
        return 1.0

    assert verifier_identity(FunctionMetric(strict)) != verifier_identity(FunctionMetric(lenient))
    assert verifier_identity(NumericMatch(abs_tol=0.1)) != verifier_identity(NumericMatch())


def _record(digest: str, score: float) -> EvaluationRecord:
    seed = Candidate(components={"solve": "x"})
    result = ExampleResult(candidate_id=seed.id, example_id="q0", split="val", score=score)
    return EvaluationRecord(scope="s", example_hash=digest, result=result)


def test_a_schema_1_store_is_migrated_to_key_evaluations_by_content(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    SQLiteStore(path).close()
    engine = create_engine(f"sqlite:///{path}")
    with engine.begin() as conn:  # make it a schema 1 store holding one evaluation
        conn.exec_driver_sql("DROP INDEX ix_evaluations_job")
        conn.exec_driver_sql("DROP TABLE evaluations")
        old = Table(
            "evaluations",
            MetaData(),
            *(column._copy() for column in t.evaluations.columns),
            UniqueConstraint("scope", "candidate_id", "example_id", "split"),
        )
        old.create(conn)
        conn.execute(old.insert(), [evaluation_row(_record("h-old", 1.0), None, 0.0)])
        conn.execute(t.meta.update().values(value="1"))
    engine.dispose()
    store = SQLiteStore(path)  # migrated when opened; the old row stays
    store.add_evaluations([_record("h-new", 0.0)])
    scores = {r.example_hash: r.result.score for r in store.load_evaluations("s")}
    assert scores == {"h-old": 1.0, "h-new": 0.0}
    store.close()
