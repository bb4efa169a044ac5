"""Rollout-level progress: counted per batch in memory, shown as a bar, a line every few
seconds, or by the Python API while a job runs."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

import emery
from emery.cli.progress import RunDisplay
from emery.core.events import event
from emery.core.example_result import ExampleResult
from emery.core.models import Candidate, Example
from emery.evaluation.budget import Budget, BudgetConfig
from emery.evaluation.progress import BatchProgress
from emery.evaluation.service import EvaluationService, eval_key
from emery.lm.usage import UsageMeter
from emery.reports.event_text import progress_line
from emery.sdk.progress_text import ProgressLines
from emery.store import MemoryStore

pytestmark = pytest.mark.usefixtures("random_search_algorithm")


def batch(done: int, total: int = 4, failed: int = 0, elapsed: float = 10.0) -> BatchProgress:
    return BatchProgress("abcdef123456", "val", done, total, failed, elapsed)


class ScriptedEvaluator:
    """Finishes each example with a result (an error for ids in ``broken``)."""

    def __init__(self, broken: set[str]) -> None:
        self.broken = broken

    async def evaluate(self, candidate, examples, split, *, on_result, gate=None, concurrency=None):  # type: ignore[no-untyped-def]
        for example in examples:
            if gate is not None:
                gate()
            error = "boom" if example.id in self.broken else None
            on_result(
                ExampleResult(
                    candidate_id=candidate.id,
                    example_id=example.id,
                    split=split,
                    score=0.0 if error else 1.0,
                    error=error,
                )
            )


async def test_the_service_reports_each_rollout_of_a_batch_and_counts_failures() -> None:
    seen: list[BatchProgress] = []
    candidate = Candidate(components={"p": "x"})
    examples = [Example(id=f"e{i}", input={"q": i}) for i in range(4)]
    prepaid = ExampleResult(candidate_id=candidate.id, example_id="e3", split="val", score=1.0)
    service = EvaluationService(
        ScriptedEvaluator({"e2"}),  # type: ignore[arg-type]
        Budget(BudgetConfig(), UsageMeter()),
        prepaid={eval_key(candidate.id, "e3", "val"): prepaid},
        on_progress=seen.append,
    )

    await service.evaluate(candidate, examples, "val")

    assert [(p.done, p.total, p.failed) for p in seen] == [
        (0, 4, 0),
        (1, 4, 0),
        (2, 4, 0),
        (3, 4, 0),
        (4, 4, 1),
    ]  # fmt: skip  (the prepaid e3 first, then e0, e1 and the failing e2)
    assert seen[-1].finished
    assert {p.candidate_id for p in seen} == {candidate.id}
    seen.clear()
    await service.evaluate(candidate, examples, "val")  # all known: no batch runs
    assert seen == []


async def test_a_failing_display_never_stops_the_evaluation() -> None:
    def broken(progress: BatchProgress) -> None:
        raise RuntimeError("display bug")

    service = EvaluationService(
        ScriptedEvaluator(set()),  # type: ignore[arg-type]
        Budget(BudgetConfig(), UsageMeter()),
        on_progress=broken,
    )
    result = await service.evaluate(
        Candidate(components={"p": "x"}), [Example(id="a", input={})], "val"
    )
    assert result.mean == 1.0


def test_progress_line_says_done_failures_rate_and_eta() -> None:
    assert progress_line(batch(2, failed=1)) == (
        "scoring abcdef12 on val: 2/4 rollouts, 1 failed, 0.20/s, ETA 10 s"
    )
    assert progress_line(batch(0)) == "scoring abcdef12 on val: 0/4 rollouts"
    assert progress_line(batch(4, elapsed=75)) == (
        "scoring abcdef12 on val: 4/4 rollouts, 0.05/s, took 1 min 15 s"
    )


def test_lines_come_every_few_seconds_and_quick_batches_stay_silent() -> None:
    now = [0.0]
    written: list[str] = []
    lines = ProgressLines(written.append, every_s=5.0, clock=lambda: now[0])
    for done, at in [(0, 0.0), (1, 1.0), (2, 4.0), (3, 6.0), (4, 7.0)]:
        now[0] = at
        lines(batch(done))
    assert [line.split(": ")[1].split(",")[0] for line in written] == [
        "3/4 rollouts",
        "4/4 rollouts",
    ]
    written.clear()
    for done, at in [(0, 10.0), (1, 10.5), (4, 11.0)]:
        now[0] = at
        lines(batch(done))
    assert written == []


def test_the_cli_display_prints_progress_lines_off_a_terminal() -> None:
    out = io.StringIO()
    display = RunDisplay("cli", Console(file=out, width=200), job_id="j-1")
    display.lines.every_s = 0.0
    with display:
        display.progress(batch(0))
        display.progress(batch(2))
    assert "scoring abcdef12 on val: 2/4 rollouts" in out.getvalue()


def test_the_chart_display_draws_a_training_job_s_curves() -> None:
    out = io.StringIO()
    with RunDisplay("chart", Console(file=out, width=120), job_id="j-sft") as display:
        display.feed([event("train_loss", step=s, loss=2.0 / s) for s in (1, 2, 4)])
    drawn = out.getvalue()
    assert "job j-sft" in drawn
    assert "step 4" in drawn
    assert "train_loss 0.5" in drawn
    assert "metric calls" not in drawn  # not the search's chart


def test_the_cli_display_draws_a_bar_on_a_terminal() -> None:
    out = io.StringIO()
    console = Console(file=out, width=120, force_terminal=True)
    with RunDisplay("cli", console, job_id="j-1") as display:
        assert display.bar is not None
        display.progress(batch(0))
        display.progress(batch(1, failed=1))
        assert display.bar.task is not None
        display.progress(batch(4, failed=1))
        assert display.bar.task is None


def test_optimize_prints_what_happens_unless_told_not_to(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def run(progress: bool) -> str:
        emery.optimize(
            None,
            {"task": "word_problems", "n_train": 4, "n_val": 4, "n_test": 2},
            algorithm="random_search",
            budget=30,
            verifier="numeric",
            settings={"iterations": 1},
            runtime={"workdir": str(tmp_path / ".emery")},
            store=MemoryStore(),
            lm="python/jobs_support:careful_task_lm",
            reflection_lm="python/jobs_support:reflection_lm",
            progress=progress,
        )
        return capsys.readouterr().err

    shown = run(True)
    assert "baseline" in shown
    assert "succeeded" in shown
    assert run(False) == ""
