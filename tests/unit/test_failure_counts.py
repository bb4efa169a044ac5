"""Failed runs are never silent zeros: each result says why it failed, and the candidate
tables, the reports and ``emery candidates`` count failed and timed-out runs; the seed's
failures are a warning."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jobs_support as js
import pytest
from typer.testing import CliRunner

from emery.cli.app import app
from emery.config import parse_config
from emery.config.resolve import JobInputs, resolve_dataset
from emery.core.models import Candidate, ChatMessage, Example
from emery.core.rollouts import RolloutConfig
from emery.evaluation import Evaluator
from emery.jobs import JobEngine, create_job, run_job
from emery.lm import Completion, FakeLM
from emery.reports import JobResult
from emery.reports.event_text import describe_event
from emery.store import SQLiteStore
from emery.systems import (
    MessageTemplate,
    PromptProgram,
    PromptProgramConfig,
    RunContext,
    StageConfig,
    SystemRun,
)
from emery.verifiers import ExactMatch, Verdict

pytestmark = pytest.mark.usefixtures("random_search_algorithm")


class TroubledLM:
    """``jobs_support.task_lm``, except that it raises on one question and hangs on another."""

    model = "fake/troubled"

    def __init__(self, raises: str, hangs: str) -> None:
        self.raises, self.hangs = raises, hangs
        self.inner = js.task_lm()

    async def complete(self, messages: Sequence[ChatMessage], **params: Any) -> Completion:
        question = messages[-1]["content"]
        if question == self.raises:
            raise ConnectionResetError("the model server dropped the call")
        if question == self.hangs:
            await asyncio.sleep(30)
        return await self.inner.complete(messages, **params)


def cli(args: list[str]) -> str:
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return result.stdout


def test_failed_runs_are_counted_per_candidate_and_split_and_the_seed_is_warned(
    tmp_path: Path,
) -> None:
    config = js.search_config(tmp_path / ".emery", iterations=2)
    config["runtime"]["timeout_s"] = 0.3
    parsed = parse_config(config)
    val = resolve_dataset(parsed, tmp_path).val
    lm = TroubledLM(raises=val[0].input["question"], hangs=val[1].input["question"])
    inputs = JobInputs(lms={"task": lm, "reflection": js.reflection_lm()})
    path = tmp_path / "emery.db"
    store = SQLiteStore(path)
    job_id = create_job(store, parsed, base_dir=tmp_path, inputs=inputs).id
    job = run_job(store, job_id, engine=JobEngine(store, job_id, inputs=inputs))
    assert job.state == "succeeded"
    seed_id = store.job_candidates(job_id)[0].id
    [seed] = [r for r in store.list_candidates(job_id).items if r.id == seed_id]
    assert (seed.n, seed.failed, seed.timeouts) == (8, 2, 1)
    [evaluated] = [
        e.data
        for e in store.list_events(job_id, kinds=["candidate_evaluated"])
        if e.data["candidate_id"] == seed_id and e.data["split"] == "val"
    ]
    assert (evaluated["failed"], evaluated["timeouts"]) == (2, 1)
    [warned] = store.list_events(job_id, kinds=["rollouts_failed"])
    assert describe_event(warned).startswith(
        "warning: the seed failed on 2 of 8 val examples (1 timed out); e.g."
    )
    result = JobResult.model_validate(job.result)
    [warning] = result.warnings
    assert warning.startswith("the seed failed on 2 of 8 val examples (1 timed out), each scored 0")
    assert "ConnectionResetError: the model server dropped the call" in warning
    report = Path(result.files["report"]).read_text()
    assert f"warning: {warning}" in report
    assert "failed" in report.split("Top candidates on val")[1].splitlines()[1]
    assert "2 (1 timed out)" in report
    store.close()
    table = cli(["candidates", job_id, "--store", str(path)])
    assert "failed" in table
    assert "2 (1 timed out)" in table
    listed = json.loads(cli(["candidates", job_id, "--store", str(path), "--json"]))
    [row] = [c for c in listed["candidates"] if c["id"] == seed_id]
    assert (row["failed"], row["timeouts"]) == (2, 1)
    html = json.loads(cli(["report", job_id, "--html", "--json", "--store", str(path)]))
    page = Path(html["html"]).read_text()
    assert "2 (1 timed out)" in page
    assert "<b>warning:</b> the seed failed on 2 of 8 val examples" in page


class Stub:
    """A system whose run raises (``raises``) or returns an error or an output."""

    name = "stub"

    def __init__(self, raises: Exception | None = None, error: str | None = None) -> None:
        self.raises, self.error = raises, error

    def seed_candidate(self) -> Candidate:
        return Candidate(components={"main": "x"})

    def version(self) -> str:
        return "v1"

    def check_inputs(self, fields: set[str]) -> None:
        return None

    async def run(self, candidate: Candidate, ctx: RunContext) -> SystemRun:
        if self.raises is not None:
            raise self.raises
        return SystemRun(output="w", error=self.error)


class RaisingVerifier(ExactMatch):
    async def verify(self, example: Example, output: Any, trace: Any = None) -> Verdict:
        raise ValueError("bad gold")


def program() -> PromptProgram:
    stage = StageConfig(
        name="solve", instruction="Say it.", messages=[MessageTemplate(template="{word}")]
    )
    return PromptProgram(PromptProgramConfig(stages=[stage]))


async def failure_of(
    system: Any, lm: Any, verifier: Any = None, timeout: float | None = None
) -> str | None:
    rollouts = RolloutConfig(timeout_seconds=timeout) if timeout else None
    evaluator = Evaluator(system, verifier or ExactMatch(), lm, rollouts=rollouts)
    example = Example(id="e", input={"word": "w"}, expected="w")
    [result] = (await evaluator.evaluate(system.seed_candidate(), [example])).results
    assert (result.error is None) == (result.failure is None)
    return result.failure


async def test_each_failed_run_says_why_it_failed() -> None:
    def fails(messages: Sequence[ChatMessage]) -> str:
        raise ConnectionError("refused")

    class HangingLM(FakeLM):
        async def complete(self, messages: Sequence[ChatMessage], **params: Any) -> Completion:
            await asyncio.sleep(30)
            return await super().complete(messages, **params)

    answers = FakeLM(lambda messages: "w")
    assert await failure_of(program(), answers) is None
    assert await failure_of(program(), FakeLM(fails)) == "model"
    assert await failure_of(program(), HangingLM([]), timeout=0.05) == "timeout"
    assert await failure_of(Stub(raises=KeyError("tool")), answers) == "error"
    assert await failure_of(Stub(error="unparseable reply"), answers) == "output"
    assert await failure_of(program(), answers, verifier=RaisingVerifier()) == "verifier"
