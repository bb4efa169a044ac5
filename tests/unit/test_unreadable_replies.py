"""A reply the parser cannot read is a wrong answer (score 0), not a failed run: its
rollout succeeds, the progress line, the event lines, the candidate tables and the result
count it as ``unreadable``, and the parser's message stays in the feedback (issue 50).
A system that crashes still fails."""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jobs_support as js
import pytest
from rich.console import Console
from typer.testing import CliRunner

from emery.cli.app import app
from emery.cli.batch_bar import BatchBar
from emery.config import parse_config
from emery.config.resolve import JobInputs
from emery.core.example_result import ExampleResult
from emery.core.models import Candidate, ChatMessage, Example
from emery.core.rollouts import RolloutConfig
from emery.evaluation import Evaluator
from emery.evaluation.eval_result import EvalResult
from emery.evaluation.health import ErrorPolicy, ErrorWatch
from emery.evaluation.progress import BatchCounter, BatchProgress
from emery.jobs import JobEngine, create_job, run_job
from emery.lm import FakeLM
from emery.reports import JobResult
from emery.reports.event_text import progress_line
from emery.store import SQLiteStore
from emery.store.records import RolloutFilter
from emery.systems import (
    MessageTemplate,
    ParserConfig,
    PromptProgram,
    PromptProgramConfig,
    RunContext,
    StageConfig,
    SystemRun,
)
from emery.systems.graph.spec import GraphConfig
from emery.systems.graph.system import GraphSystem
from emery.verifiers import NumericMatch

UNLABELED = "So the total is \\boxed{12}."  # no "Answer: 12" line: the parser cannot read it


def program() -> PromptProgram:
    stage = StageConfig(
        name="solve",
        instruction="Solve it.",
        messages=[MessageTemplate(template="{question}")],
        parser=ParserConfig(kind="regex", pattern=r"Answer:\s*(\d+)"),
    )
    return PromptProgram(PromptProgramConfig(stages=[stage]))


class Crashes:
    """A system whose run raises."""

    name = "crashes"

    def seed_candidate(self) -> Candidate:
        return Candidate(components={"main": "x"})

    def version(self) -> str:
        return "v1"

    def check_inputs(self, fields: set[str]) -> None:
        return None

    async def run(self, candidate: Candidate, ctx: RunContext) -> SystemRun:
        raise KeyError("the tool table")


EXAMPLES = [Example(id=f"e{i}", input={"question": f"{i} + 0?"}, expected=i) for i in range(3)]


async def evaluate(system: Any, lm: FakeLM) -> EvalResult:
    rollouts = RolloutConfig(max_attempts=2)  # an unreadable reply is not retried
    evaluator = Evaluator(system, NumericMatch(), lm, rollouts=rollouts)
    return await evaluator.evaluate(system.seed_candidate(), EXAMPLES, "test")


async def test_a_reply_without_the_answer_line_is_a_wrong_answer_not_a_failed_run() -> None:
    lm = FakeLM(lambda messages: UNLABELED)
    scored = await evaluate(program(), lm)
    for result in scored.results:
        assert (result.score, result.error, result.failure) == (0.0, None, None)
        assert (result.rollout_status, result.attempts, result.lm_calls) == ("succeeded", 1, 1)
        assert result.unreadable is not None
        assert "must match the pattern" in result.unreadable
        assert result.feedback == f"The reply could not be read: {result.unreadable}"
    summary = scored.summary()
    assert (summary.n, summary.failed, summary.unreadable) == (3, 0, 3)
    assert str(summary).endswith("n=3, 3 unreadable)")
    assert len(lm.calls) == 3
    # a readable reply is scored by the verifier as before
    right = await evaluate(program(), FakeLM(lambda m: f"Answer: {m[-1]['content'][0]}"))
    assert [(r.score, r.unreadable) for r in right.results] == [(1.0, None)] * 3


async def test_a_system_that_raises_still_fails() -> None:
    crashed = await evaluate(Crashes(), FakeLM(lambda messages: "Answer: 1"))
    for result in crashed.results:
        assert (result.score, result.failure, result.unreadable) == (0.0, "error", None)
        assert result.rollout_status == "failed"
        assert "KeyError" in (result.error or "")
    summary = crashed.summary()
    assert (summary.failed, summary.unreadable) == (3, 0)


async def test_unreadable_replies_do_not_stop_the_job_as_errors() -> None:
    scored = await evaluate(program(), FakeLM(lambda messages: UNLABELED))
    seed = program().seed_candidate()
    ErrorWatch(ErrorPolicy(min_rollouts=1)).check(seed, "val", scored.results, scored.results)


def test_progress_counts_unreadable_replies_apart_from_failed_runs() -> None:
    seen: list[BatchProgress] = []
    counter = BatchCounter(seen.append, "abcdef123456", "test", 4)
    base = {"candidate_id": "abcdef123456", "example_id": "e", "split": "test"}
    counter.add(ExampleResult(**base, unreadable="the reply must match the pattern"))
    counter.add(ExampleResult(**base, unreadable="the reply must match the pattern"))
    counter.add(ExampleResult(**base, error="KeyError: 'x'", failure="error"))
    counter.add(ExampleResult(**base, score=1.0))
    last = seen[-1]
    assert (last.done, last.failed, last.unreadable) == (4, 1, 2)
    line = progress_line(seen[3])  # seen[0]: the batch's start, nothing done
    assert line.startswith("scoring abcdef12 on test: 3/4 rollouts, 1 failed, 2 unreadable,")
    unreadable_only = progress_line(seen[2])
    assert "failed" not in unreadable_only
    assert "2/4 rollouts, 2 unreadable" in unreadable_only
    console = Console(file=io.StringIO(), force_terminal=True, width=200)
    with BatchBar(console) as bar:
        bar.update(seen[0])
        bar.update(seen[2])
        assert bar.task is not None
        assert bar.progress.tasks[0].fields["failed"] == ", 2 unreadable"


def unlabeled(messages: Sequence[ChatMessage]) -> str:
    return UNLABELED


@pytest.mark.usefixtures("random_search_algorithm")
def test_a_job_counts_unreadable_replies_in_its_tables_events_and_result(
    tmp_path: Path,
) -> None:
    parsed = parse_config(js.search_config(tmp_path / ".emery", iterations=1, n=(2, 3, 2)))
    inputs = JobInputs(lms={"task": FakeLM(unlabeled), "reflection": js.reflection_lm()})
    path = tmp_path / "emery.db"
    store = SQLiteStore(path)
    job_id = create_job(store, parsed, base_dir=tmp_path, inputs=inputs).id
    job = run_job(store, job_id, engine=JobEngine(store, job_id, inputs=inputs))
    assert job.state == "succeeded"
    seed_id = store.job_candidates(job_id)[0].id
    [seed] = [r for r in store.list_candidates(job_id).items if r.id == seed_id]
    assert (seed.n, seed.failed, seed.unreadable) == (3, 0, 3)
    evaluated = [e.data for e in store.list_events(job_id, kinds=["candidate_evaluated"])]
    assert evaluated
    assert all(e["failed"] == 0 and e["unreadable"] == e["n"] for e in evaluated)
    assert store.list_events(job_id, kinds=["rollouts_failed"]) == []
    rollouts = store.list_rollouts(RolloutFilter(job_id=job_id), limit=None).items
    assert {(r.status, r.score, r.error) for r in rollouts} == {("succeeded", 0.0, None)}
    result = JobResult.model_validate(job.result)
    assert result.baseline_test is not None
    assert (result.baseline_test.failed, result.baseline_test.unreadable) == (0, 2)
    assert result.warnings[0] == (
        "the parser could not read the seed's reply on 3 of 3 val examples,"
        " each scored 0 as a wrong answer"
    )
    report = Path(result.files["report"]).read_text()
    assert "2 unreadable" in report
    assert "unreadable" in report.split("Top candidates on val")[1].splitlines()[1]
    store.close()
    runner = CliRunner()
    listed = runner.invoke(app, ["candidates", job_id, "--store", str(path), "--json"])
    assert listed.exit_code == 0, listed.output
    [row] = [c for c in json.loads(listed.stdout)["candidates"] if c["id"] == seed_id]
    assert (row["failed"], row["unreadable"]) == (0, 3)


def graph(*nodes: dict[str, Any]) -> GraphSystem:
    return GraphSystem(GraphConfig.model_validate({"name": "g", "nodes": list(nodes)}))


@pytest.mark.parametrize("samples", [1, 3])
async def test_a_graph_node_whose_reply_cannot_be_read_is_unreadable(samples: int) -> None:
    counter = {
        "kind": "llm",
        "name": "counter",
        "messages": [{"template": "count {q}"}],
        "parser": {"kind": "regex", "pattern": r"(\d+)"},
        "samples": samples,
    }
    system = graph(counter, {"kind": "output", "value": "counter"})
    example = Example(id="e", input={"q": "x"})
    context = RunContext(lm=FakeLM(lambda m: "no number"), example=example)
    run = await system.run(system.seed_candidate(), context)
    assert run.failure == "unreadable"
    assert (run.error or "").startswith("node 'counter': the reply must")
    crashing = graph(
        {"kind": "code", "name": "boom", "source": "def boom(q):\n    raise ValueError(q)"},
        {"kind": "llm", "name": "after", "messages": [{"template": "{boom}"}]},
        {"kind": "output", "value": "after"},
    )
    crashed = await crashing.run(crashing.seed_candidate(), context)
    assert crashed.failure == "error"
