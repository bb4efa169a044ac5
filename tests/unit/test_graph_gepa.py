"""Structure search on a scripted task that only a two-node graph can solve.

The seed is one llm node, ``solve``, whose reply must end with ``Answer: <n>``. The scripted
task model always answers one too many in a single call, whatever its instruction, layout or
demos; it gives the right answer only when it is shown its own reasoning and asked for the
answer (a node whose user turn has a ``Reasoning:`` block). So text-only GEPA stays at 0,
and ``graph_gepa`` must find the ``answer`` mutation (solve → solve_answer), validate it,
score it and keep it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from lift_support import assert_test_lift
from test_gepa_resume import checkpoint, known_results, restore_candidates

import emery
from emery.algorithms import StepRecord, build_algorithm, run_search
from emery.algorithms.base import SearchContext
from emery.algorithms.context import build_search_context
from emery.algorithms.gepa import GepaState
from emery.config import parse_config
from emery.core.errors import EmeryError
from emery.core.events import Event
from emery.core.models import ChatMessage, Dataset
from emery.data.tasks import builtin_task
from emery.evaluation.budget import BudgetConfig
from emery.jobs import create_job, run_job
from emery.jobs.engine import JobEngine
from emery.lm import FakeLM
from emery.lm.base import LM
from emery.lm.usage import MeteredLM, UsageMeter
from emery.reports.job_result import JobResult
from emery.reports.report import render_report
from emery.store import MemoryStore
from emery.systems.graph.spec import GraphConfig
from emery.systems.graph.system import SPEC_COMPONENT, GraphSystem
from emery.verifiers.config import VerifierConfig, build_verifier

GRAPH: dict[str, Any] = {
    "kind": "graph",
    "name": "one_node",
    "nodes": [
        {
            "kind": "llm",
            "name": "solve",
            "instruction": "Solve the problem.",
            "messages": [{"template": "Problem: {question}"}],
            "parser": {"kind": "regex", "pattern": r"Answer:\s*(-?\d+)"},
        },
        {"kind": "output", "value": "solve"},
    ],
}

pytestmark = pytest.mark.usefixtures("quiet_evaluator_failures")


def problems() -> Dataset:
    return builtin_task("word_problems").dataset(seed=0, n_train=6, n_val=4, n_test=4)


def task_lm(data: Dataset) -> FakeLM:
    gold = {str(e.input["question"]): int(e.expected) for e in data}

    def reply(messages: Sequence[ChatMessage]) -> str:
        asked = messages[-1]["content"]
        question = asked.split("\n")[0].removeprefix("Problem: ")
        if question not in gold:
            return "I am not sure."
        if "\nReasoning:\n" in asked:
            return f"Answer: {gold[question]}"
        return f"Adding it all up.\nAnswer: {gold[question] + 1}"

    return FakeLM(reply, model="fake/task")


def proposer() -> FakeLM:
    return FakeLM(
        lambda messages: "```\nSolve the problem carefully. End with 'Answer: <number>'.\n```",
        model="fake/proposer",
    )


def optimize(algorithm: str, tmp_path: Path, **settings: Any) -> tuple[JobResult, list[Event]]:
    data = problems()
    seen: list[Event] = []
    result = emery.optimize(
        GRAPH,
        data,
        algorithm=algorithm,
        budget=150,
        verifier="numeric",
        lm=task_lm(data),
        reflection_lm=proposer(),
        settings=settings,
        runtime={"workdir": str(tmp_path / ".emery")},
        store=MemoryStore(),
        on_event=seen.append,
        progress=False,
    )
    assert result.state == "succeeded"
    return result, seen


def test_graph_gepa_adds_the_answer_node_text_only_gepa_cannot_score(tmp_path: Path) -> None:
    text_only, _ = optimize("gepa", tmp_path / "gepa")
    assert text_only.best_test is not None
    assert text_only.best_test.mean == 0.0

    result, seen = optimize("graph_gepa", tmp_path / "graph")
    best = assert_test_lift(result, 0.0, 1.0)
    assert result.best_val == 1.0
    assert best.lineage.operation == "structure.answer"
    graph = GraphConfig.model_validate_json(best.components[SPEC_COMPONENT])
    assert [node.name for node in graph.llm_nodes()] == ["solve", "solve_answer"]
    costs = {e.data["candidate_id"]: e.data for e in seen if e.kind == "graph.candidate_cost"}
    assert costs[best.id]["llm_calls"] == 2
    assert costs[best.id]["llm_calls_per_example"] == 2.0
    assert costs[result.seed_candidate.id]["llm_calls"] == 1  # type: ignore[union-attr]
    assert (result.baseline_test.lm_calls, result.best_test.lm_calls) == (1.0, 2.0)
    report = render_report(result)
    assert "LM calls per test example  1.00" in report
    assert '+   "value": "solve_answer"' in report  # the structure diffed against the seed


def test_target_llm_calls_bounds_every_candidate(tmp_path: Path) -> None:
    result, seen = optimize("graph_gepa", tmp_path, target_llm_calls=1, max_iterations=8)
    assert result.best_test is not None
    assert result.best_test.mean == 0.0
    costs = [e.data for e in seen if e.kind == "graph.candidate_cost"]
    assert costs
    assert all(cost["llm_calls"] <= 1 for cost in costs)
    over = [
        e.data["reason"]
        for e in seen
        if e.kind == "gepa.proposal_invalid" and "over target_llm_calls=1" in e.data["reason"]
    ]
    assert any(reason.startswith("structure.answer@solve") for reason in over)
    proposed = [e.data["candidate_id"] for e in seen if e.kind == "candidate_proposed"]
    evaluated = {e.data["candidate_id"] for e in seen if e.kind == "candidate_evaluated"}
    assert evaluated <= {result.seed_candidate.id, *proposed}  # type: ignore[union-attr]


def test_a_seed_over_the_target_is_a_clear_error(tmp_path: Path) -> None:
    two = json.loads(json.dumps(GRAPH))
    two["nodes"][0]["samples"] = 3
    with pytest.raises(EmeryError, match="already makes 3 LM calls per example"):
        emery.optimize(
            two,
            problems(),
            algorithm="graph_gepa",
            budget=20,
            verifier="numeric",
            lm=task_lm(problems()),
            reflection_lm=proposer(),
            settings={"target_llm_calls": 2},
            runtime={"workdir": str(tmp_path / ".emery")},
            store=MemoryStore(),
            progress=False,
        )


def context(data: Dataset, **kwargs: Any) -> SearchContext:
    meter = kwargs.pop("meter", None)
    lms: dict[str, LM] = {"task": task_lm(data), "reflection": proposer()}
    if meter is not None:
        lms = {role: MeteredLM(lm, meter, role) for role, lm in lms.items()}
    return build_search_context(
        system=GraphSystem(GraphConfig.model_validate(GRAPH)),
        dataset=data,
        verifier=build_verifier(VerifierConfig(kind="numeric")),
        lms=lms,
        meter=meter,
        concurrency=4,
        **kwargs,
    )


async def search(
    ctx: SearchContext, records: list[StepRecord], stop_after: int | None = None, **kw: Any
) -> Any:
    async def on_step(record: StepRecord) -> None:
        records.append(record)

    def should_stop() -> str | None:
        return "killed" if stop_after is not None and len(records) >= stop_after else None

    settings = {"stop_when_perfect": False, "skip_perfect": False, "max_iterations": 8}
    algorithm = build_algorithm("graph_gepa", settings)
    return await run_search(algorithm, ctx, on_step=on_step, should_stop=should_stop, **kw)


@pytest.mark.parametrize("kill_after", [1, 3, 6])
async def test_resume_after_a_kill_ends_like_an_uninterrupted_run(kill_after: int) -> None:
    data, budget = problems(), BudgetConfig(metric_calls=200)
    full_records: list[StepRecord] = []
    full = await search(context(data, budget=budget), full_records)

    first: list[StepRecord] = []
    killed = await search(context(data, budget=budget), first, stop_after=kill_after)
    assert killed.reason == "killed"
    resumed_ctx = context(
        data,
        budget=budget,
        meter=UsageMeter(dict(first[-1].usage)),
        known=known_results(first),
        budget_usage=first[-1].budget.model_copy(deep=True),
    )
    restore_candidates(resumed_ctx, first)
    second: list[StepRecord] = []
    resumed = await search(resumed_ctx, second, state=checkpoint(first))

    assert isinstance(full.state, GepaState)
    assert isinstance(resumed.state, GepaState)
    assert resumed.state.model_dump() == full.state.model_dump()
    assert resumed.reason == full.reason
    assert [e.operation for e in full.state.pool] == ["seed", "structure.answer"]
    assert all(SPEC_COMPONENT in e.candidate.components for e in full.state.pool)
    parts = sorted((r.candidate_id, r.example_id) for rec in first + second for r in rec.results)
    whole = sorted((r.candidate_id, r.example_id) for rec in full_records for r in rec.results)
    assert parts == whole
    kinds = [e.kind for rec in first + second for e in rec.events]
    assert kinds == [e.kind for rec in full_records for e in rec.events]


def test_graph_gepa_on_a_prompt_program_is_a_clear_error(tmp_path: Path) -> None:
    program = {
        "kind": "prompt_program",
        "stages": [{"name": "solve", "messages": [{"template": "{question}"}]}],
    }
    with pytest.raises(EmeryError, match="graph_gepa searches a graph's structure"):
        emery.optimize(
            program,
            problems(),
            algorithm="graph_gepa",
            budget=20,
            verifier="numeric",
            lm=task_lm(problems()),
            reflection_lm=proposer(),
            runtime={"workdir": str(tmp_path / ".emery")},
            store=MemoryStore(),
            progress=False,
        )


def test_a_task_set_alone_is_searched_from_its_one_node_graph(tmp_path: Path) -> None:
    data = problems()
    rows = [
        {"id": e.id, "input": {"question": e.input["question"]}, "expected": e.expected}
        for e in data
    ]
    document = {
        "metadata": {"name": "sums", "description": "Solve it.", "verifier": "numeric"},
        "tasks": [{"id": row["id"], "input": row["input"]} for row in rows],
        "gold_outputs": {row["id"]: row["expected"] for row in rows},
    }
    path = tmp_path / "sums.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    gold = {str(e.input["question"]): int(e.expected) for e in data}

    def reply(messages: Sequence[ChatMessage]) -> str:  # right only when shown its reasoning
        question = messages[-1]["content"].split("\n")[0]
        if "\nReasoning:\n" in messages[-1]["content"]:
            return str(gold[question])
        return str(gold.get(question, 0) + 1)

    seen: list[Event] = []
    result = emery.optimize(
        None,
        str(path),
        algorithm="graph_gepa",
        budget=150,
        lm=FakeLM(reply, model="fake/task"),
        reflection_lm=proposer(),
        runtime={"workdir": str(tmp_path / ".emery")},
        store=MemoryStore(),
        on_event=seen.append,
        progress=False,
    )
    assert result.state == "succeeded"
    assert result.baseline_val == 0.0
    assert result.best_val == 1.0
    assert result.best_candidate is not None
    assert result.best_candidate.lineage.operation == "structure.answer"


def make_task_lm() -> FakeLM:
    """The scripted task model, as a config loads it (``python/test_graph_gepa:...``)."""
    return task_lm(problems())


def make_proposer() -> FakeLM:
    return proposer()


def job_config(workdir: Path) -> dict[str, Any]:
    return {
        "job": {"algorithm": "graph_gepa", "seed": 0, "budget": {"metric_calls": 150}},
        "system": GRAPH,
        "dataset": {"task": "word_problems", "n_train": 6, "n_val": 4, "n_test": 4},
        "lm": {
            "task": {"model": "python/test_graph_gepa:make_task_lm"},
            "reflection": {"model": "python/test_graph_gepa:make_proposer"},
        },
        "verifier": {"kind": "numeric"},
        "runtime": {"workdir": str(workdir), "concurrency": 4},
        "algorithm": {
            "graph_gepa": {"stop_when_perfect": False, "skip_perfect": False, "max_iterations": 6}
        },
    }


def new_job(store: MemoryStore, folder: Path) -> str:
    config = job_config(folder / ".emery")
    return create_job(store, parse_config(config), given=config, base_dir=folder).id


def test_a_job_stopped_mid_search_resumes_to_the_same_end(tmp_path: Path) -> None:
    reference_store = MemoryStore()
    reference_id = new_job(reference_store, tmp_path / "reference")
    reference = run_job(reference_store, reference_id)
    assert reference.state == "succeeded"

    store = MemoryStore()
    job_id = new_job(store, tmp_path / "stopped")

    def stop_after_third_checkpoint(events: list[Event]) -> None:
        if any(e.kind == "checkpoint_saved" and e.data["iteration"] == 3 for e in events):
            engine.request("pause")  # stops the run at once, as a kill would

    engine = JobEngine(store, job_id, on_event=stop_after_third_checkpoint)
    assert run_job(store, job_id, engine=engine).state == "paused"
    assert store.get_checkpoint(job_id).number < reference_store.get_checkpoint(reference_id).number
    resumed = run_job(store, job_id)
    assert resumed.state == "succeeded"
    assert (resumed.best_candidate_id, resumed.best_score) == (
        reference.best_candidate_id,
        reference.best_score,
    )
    best = next(c for c in store.job_candidates(job_id) if c.id == resumed.best_candidate_id)
    assert best.lineage.operation == "structure.answer"
    assert {c.id for c in store.job_candidates(job_id)} == {
        c.id for c in reference_store.job_candidates(reference_id)
    }
    paid = [
        (e.result.candidate_id, e.result.example_id, e.result.split)
        for e in store.list_evaluations(limit=None).items
    ]
    assert len(paid) == len(set(paid))  # no rollout paid twice
