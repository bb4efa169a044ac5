"""The fast part of the reliability suites of ``benchmarks/reliability`` (``make
reliability-kills``, ``reliability-faults`` and ``reliability-fuzz`` run them in full): LM
faults against the mock endpoint, and a short fuzz of both HTTP servers.

A guarantee another file already checks is not checked here again: SIGKILL and resume is
``test_engine_kill_resume``, the schemathesis fuzz of ``emery server`` is
``test_server_fuzz``, and a job whose model always fails ending on one line is
``test_a_failed_job_says_why_on_one_line`` below. Replies the parser cannot read counted as
wrong answers, not failed runs, is ``unreadable.py``'s case, run here in-process; a job
paused in its final test scoring resuming into that scoring only is ``search_end.py``'s."""

from __future__ import annotations

from pathlib import Path

import pytest
from bad_input_support import RELIABILITY, job_config, run_cli

assert RELIABILITY.is_dir()

import faults  # noqa: E402
import fuzz  # noqa: E402
import search_end  # noqa: E402
import unreadable  # noqa: E402

from emery.proxy.serving import BackgroundServer  # noqa: E402


@pytest.mark.slow
def test_lm_faults_at_20_percent_are_retried_to_the_fault_free_result(tmp_path: Path) -> None:
    clean = faults.run_job("gepa", "none", 0.0, tmp_path)
    assert clean.outcome["state"] == "succeeded"
    run = faults.run_job("gepa", "garbage", 0.2, tmp_path)
    faults.judge(run, clean.outcome)
    assert run.problems == [], faults.line(run)
    assert run.counts["garbage"] > 0


def test_a_failed_job_says_why_on_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)  # 80 columns: a long cause used to wrap
    config = job_config(tmp_path, "python/scripted_lm:failing_lm")
    assert run_cli(["train", str(config), "--store", str(tmp_path / "s.db")]) != 0
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert lines[-1].startswith("job "), lines
    assert " failed: " in lines[-1], lines
    assert lines[-1].endswith("try again in an hour or so"), lines


def test_replies_the_parser_cannot_read_are_wrong_answers_not_failed_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "job.toml").write_text(unreadable.config(tmp_path / "work"))
    store = tmp_path / "emery.db"
    code = run_cli(["train", str(tmp_path / "job.toml"), "--store", str(store)])
    printed = capsys.readouterr()
    assert unreadable.problems(code, printed.err, printed.out, store) == []


@pytest.mark.slow
def test_a_job_paused_in_its_test_scoring_resumes_into_the_scoring_only(tmp_path: Path) -> None:
    assert search_end.problems(tmp_path) == []


@pytest.mark.parametrize("name", ["serve", "taskapp"])
def test_no_malformed_request_gets_a_server_error(name: str) -> None:
    with BackgroundServer(fuzz.servers()[name]) as server:
        tally = fuzz.malformed_fuzz(name, server.url)
    assert sum(tally.statuses.values()) > 30
    assert tally.server_errors == []
    assert tally.resets == []


@pytest.mark.slow
def test_schemathesis_finds_no_server_error_in_the_task_app() -> None:
    pytest.importorskip("schemathesis")
    with BackgroundServer(fuzz.servers()["taskapp"]) as server:
        tally = fuzz.schema_fuzz("taskapp", server.url, examples=8)
    assert tally.operations >= 3
    assert tally.server_errors == []
