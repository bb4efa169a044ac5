"""``emery report JOB --html``: one self-contained file with plots, lineage, diff and usage."""

from __future__ import annotations

import html
import re
from pathlib import Path

import jobs_support as js
import pytest
from test_cli_jobs import write

from emery.cli.app import main
from emery.core.events import event
from emery.evaluation.label_agreement import LabelAgreement
from emery.reports.html_report import ReportData, render_html
from emery.reports.job_result import JobResult
from emery.reports.plots import score_points
from emery.store import SQLiteStore

pytestmark = pytest.mark.usefixtures("random_search_algorithm")


def run_cli(args: list[str]) -> int:
    with pytest.raises(SystemExit) as info:
        main(args)
    code = info.value.code
    return code if isinstance(code, int) else 0


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("EMERY_STORE", raising=False)
    monkeypatch.setenv("PYTHONPATH", js.worker_env()["PYTHONPATH"])


def test_html_report_holds_plots_lineage_diff_usage_and_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # careful_task_lm: the seed fails every question and the first reflected instruction
    # none, so the winner is not the seed and the report has a diff to show
    config = write(tmp_path / "job.toml", iterations=4, task_lm="careful_task_lm")
    assert run_cli(["train", str(config)]) == 0
    [job] = SQLiteStore(Path(".emery") / "emery.db").list_jobs().items
    capsys.readouterr()

    assert run_cli(["report", job.id, "--html"]) == 0
    target = tmp_path / "results" / f"job-{job.id}.html"
    assert str(target) in capsys.readouterr().out
    page = target.read_text()

    assert page.count("<svg") == 2  # score over budget, lineage
    for heading in ("Scores", "Score over budget", "Best candidate", "Lineage", "LM usage"):
        assert f"<h2>{heading}" in page
    assert "random_search" in page  # the job's config
    assert "python/jobs_support:careful_task_lm" in page
    candidates = SQLiteStore(Path(".emery") / "emery.db").list_candidates(job.id).items
    for record in candidates:
        assert record.id in page
    seed = next(r for r in candidates if r.candidate.lineage.operation == "seed")
    assert job.best_candidate_id not in (None, seed.id)
    assert "Diff against the seed" in page
    assert not re.search(r"(src|href)=\"https?:", page)  # nothing fetched from the network


def test_html_report_to_a_chosen_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["train", str(write(tmp_path / "job.toml", iterations=1))]) == 0
    [job] = SQLiteStore(Path(".emery") / "emery.db").list_jobs().items
    target = tmp_path / "out" / "report.html"
    assert run_cli(["report", job.id, "--html", "--output", str(target), "--json"]) == 0
    assert str(target) in capsys.readouterr().out.splitlines()[-2]
    assert target.read_text().startswith("<!doctype html>")


def test_score_points_count_metric_calls_in_event_order() -> None:
    events = [
        event(
            "candidate_evaluated", candidate_id="a", split="val", score=0.2, n=10, new_rollouts=10
        ),
        event("iteration_completed", iteration=1, metric_calls=10),
        event(
            "candidate_evaluated", candidate_id="b", split="train", score=1.0, n=3, new_rollouts=3
        ),
        event(
            "candidate_evaluated", candidate_id="b", split="val", score=0.5, n=10, new_rollouts=7
        ),
    ]
    points = score_points(events)
    assert [p.metric_calls for p in points] == [10, 13, 20]
    assert [p.split for p in points] == ["val", "train", "val"]
    assert points[-1].score == 0.5


def test_candidates_tree_and_text_report_diff(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write(tmp_path / "job.toml", iterations=4, task_lm="careful_task_lm")
    assert run_cli(["train", str(config)]) == 0
    db = SQLiteStore(Path(".emery") / "emery.db")
    [job] = db.list_jobs().items
    records = db.list_candidates(job.id, limit=None).items
    capsys.readouterr()

    assert run_cli(["candidates", job.id, "--tree"]) == 0
    tree = capsys.readouterr().out
    lines = tree.splitlines()
    assert lines[0].split()[1] == "seed"  # the seed is the root
    assert len(lines) == len(records)
    assert "★ best" in tree
    best_line = next(line for line in lines if "★ best" in line)
    assert (job.best_candidate_id or "")[:8] in best_line

    assert run_cli(["report", job.id]) == 0
    text = capsys.readouterr().out
    seed = next(r for r in records if r.candidate.lineage.operation == "seed")
    assert job.best_candidate_id not in (None, seed.id)
    assert "Diff against the seed" in text
    assert "-Answer the question." in text


@pytest.mark.parametrize(
    ("labels", "line"),
    [
        (
            LabelAgreement(examples=10, labeled=6, n=6, rho=0.87),
            "labels: 6 of 10 examples have feedback (60%); judge vs feedback:"
            " Spearman rho +0.87 (n = 6)",
        ),
        (
            LabelAgreement(examples=4, labeled=0),
            "labels: 0 of 4 examples have feedback (0%)",
        ),
    ],
)
def test_html_report_has_the_label_line_of_a_dataset_from_traces(
    labels: LabelAgreement, line: str
) -> None:
    result = JobResult(
        job_id="j-1", name="n", kind="prompt", algorithm="baseline", state="succeeded"
    )
    data = ReportData(result=result, events=[], candidates=[], scores={}, config={})
    assert "labels:" not in render_html(data)  # not a dataset from traces: no line
    data.result = result.model_copy(update={"labels": labels})
    assert f"<p>{html.escape(line)}</p>" in render_html(data)
