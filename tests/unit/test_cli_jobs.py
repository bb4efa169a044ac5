"""``emery train``, ``emery jobs ...``, ``emery candidates`` and ``emery report``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import jobs_support as js
import pytest

from emery.cli.app import main
from emery.config import load_config
from emery.jobs import create_job
from emery.store import SQLiteStore

pytestmark = pytest.mark.usefixtures("random_search_algorithm")

TRAIN = """
[job]
algorithm = "random_search"
seed = 1

[dataset]
task = "word_problems"
n_train = 6
n_val = 8
n_test = 4

[lm.task]
model = "python/jobs_support:task_lm"

[lm.reflection]
model = "python/jobs_support:reflection_lm"

[verifier]
kind = "numeric"

[algorithm.random_search]
iterations = {iterations}
"""

BASELINE = """
[job]
algorithm = "baseline"

[dataset]
task = "word_problems"
n_train = 0
n_val = 6
n_test = 2

[lm.task]
model = "python/jobs_support:task_lm"

[algorithm.baseline]
candidates = [{candidates}]
"""


def run_cli(args: list[str]) -> int:
    with pytest.raises(SystemExit) as info:
        main(args)
    code = info.value.code
    return code if isinstance(code, int) else (0 if code is None else 1)


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("EMERY_STORE", raising=False)
    monkeypatch.setenv("PYTHONPATH", js.worker_env()["PYTHONPATH"])


def write(path: Path, iterations: int = 3, *, task_lm: str = "task_lm") -> Path:
    """The TRAIN job; ``task_lm="careful_task_lm"``: a search sure to beat the seed."""
    text = TRAIN.replace("{iterations}", str(iterations))
    path.write_text(text.replace("jobs_support:task_lm", f"jobs_support:{task_lm}"))
    return path


def baseline_config(path: Path, count: int) -> Path:
    candidates = ", ".join(f'{{solve = "Variant {i}."}}' for i in range(count))
    path.write_text(BASELINE.replace("{candidates}", candidates))
    return path


def store() -> SQLiteStore:
    return SQLiteStore(Path(".emery") / "emery.db")


def only_job_id() -> str:
    [job] = store().list_jobs().items
    return job.id


def test_train_finds_the_config_here_and_reports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path / "job.toml")
    (tmp_path / "notes.toml").write_text("[other]\nkey = 1\n")  # not a job config
    assert run_cli(["train"]) == 0
    captured = capsys.readouterr()
    assert "using job.toml" in captured.err
    for line in ("started", "baseline", "checkpoint 0 saved", "iteration 3 done", "succeeded"):
        assert line in captured.err
    assert "Best candidate" in captured.out
    assert "lift on test" in captured.out
    job = store().get_job(only_job_id())
    assert job.state == "succeeded"
    assert job.config_path == str(tmp_path / "job.toml")
    assert job.config["algorithm"]["random_search"] == {"iterations": 3}  # as given
    assert job.resolved_config is not None
    assert job.resolved_config["runtime"]["concurrency"] == 8  # with defaults
    assert (tmp_path / "results" / f"job-{job.id}.json").is_file()
    assert (tmp_path / "results" / f"job-{job.id}.txt").is_file()


def test_train_json_prints_only_the_result(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write(tmp_path / "job.toml", task_lm="careful_task_lm")
    assert run_cli(["train", str(config), "--json"]) == 0
    captured = capsys.readouterr()
    payload = json.loads(captured.out)
    for line in ("created job", "started", "iteration 3 done", "succeeded"):
        assert line in captured.err  # the progress stays on stderr
    assert payload["state"] == "succeeded"
    assert payload["result"]["baseline_val"] == 0.0  # the seed fails every question
    assert payload["result"]["best_val"] == 1.0  # a reflected instruction answers them all
    assert payload["result"]["best_candidate"]["components"]["solve"]


def test_train_quiet_prints_no_progress(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write(tmp_path / "job.toml", iterations=1)
    assert run_cli(["train", str(config), "--json", "--quiet"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["state"] == "succeeded"
    assert captured.err == ""


def test_names_print_their_control_characters_and_markup_literally(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = "\x1b[31mred[/bold][bold]\x9b2J\x07"
    shown = "\\x1b[31mred[/bold][bold]\\x9b2J\\x07"
    config = write(tmp_path / "job.toml", iterations=1)
    assert run_cli(["train", str(config), "--name", name]) == 0
    assert shown in capsys.readouterr().err  # "created job ..."
    for command in (["jobs", "list"], ["jobs", "show", only_job_id()]):
        assert run_cli(command) == 0
        out = capsys.readouterr().out
        assert shown in out
        assert not set(out) & {"\x1b", "\x9b", "\x07"}
    assert run_cli(["jobs", "show", only_job_id(), "--json"]) == 0
    out = capsys.readouterr().out
    assert json.loads(out)["name"] == name
    assert not set(out) & {"\x1b", "\x9b", "\x07"}


def test_train_refuses_to_guess_between_configs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path / "a.toml")
    write(tmp_path / "b.toml")
    assert run_cli(["train"]) == 2
    err = capsys.readouterr().err
    assert "several job configs here (a.toml, b.toml): name the one to train" in err
    assert "Traceback" not in err


def test_train_without_a_config_here(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["train"]) == 2
    assert "no CONFIG given and no job config" in capsys.readouterr().err


def test_train_names_an_unknown_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "job.toml"
    path.write_text(TRAIN.replace("algorithm =", "algoritm =").replace("{iterations}", "2"))
    assert run_cli(["train", str(path)]) == 2
    assert "unknown key 'job.algoritm'; did you mean 'algorithm'?" in capsys.readouterr().err
    assert not (tmp_path / ".emery" / "emery.db").exists() or store().list_jobs().total == 0


def test_train_resumes_an_unfinished_job_of_the_same_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path / "job.toml")
    job = create_job(store(), load_config(path), config_path=path)
    store().transition(job.id, "queued")
    store().transition(job.id, "paused")
    assert run_cli(["train", str(path)]) == 0
    assert f"resuming {job.id}" in capsys.readouterr().err
    assert store().list_jobs().total == 1
    assert store().get_job(job.id).state == "succeeded"
    assert run_cli(["train", str(path), "--new", "--stream-format", "none"]) == 0
    assert store().list_jobs().total == 2


def test_the_job_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["train", str(write(tmp_path / "job.toml", iterations=4)), "--json"]) == 0
    capsys.readouterr()
    job_id = only_job_id()

    assert run_cli(["jobs", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert (listed["total"], listed["jobs"][0]["state"]) == (1, "succeeded")
    assert run_cli(["jobs", "list", "--state", "running", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["total"] == 0
    assert run_cli(["jobs", "list"]) == 0
    assert job_id in capsys.readouterr().out

    assert run_cli(["jobs", "show", job_id[:5]]) == 0
    shown = capsys.readouterr().out
    assert "best val" in shown
    assert "checkpoint" in shown

    assert run_cli(["jobs", "events", job_id, "--since", "3", "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines[0]["seq"] == 4
    assert lines[-1]["kind"] == "succeeded"
    assert run_cli(["jobs", "events", job_id, "--kind", "checkpoint_saved"]) == 0
    assert capsys.readouterr().out.count("saved") == 5

    assert run_cli(["candidates", job_id, "--top", "2", "--json"]) == 0
    top = json.loads(capsys.readouterr().out)
    assert len(top["candidates"]) == 2
    assert top["candidates"][0]["score"] >= top["candidates"][1]["score"]
    best = top["candidates"][0]
    assert run_cli(["candidates", job_id, "--show", best["id"][:8]]) == 0
    assert best["components"]["solve"] in capsys.readouterr().out
    assert run_cli(["candidates", job_id]) == 0
    assert "* = the job's best" in capsys.readouterr().out

    assert run_cli(["report", job_id]) == 0
    assert "Top candidates on val" in capsys.readouterr().out
    assert run_cli(["report", job_id, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["job_id"] == job_id

    assert run_cli(["jobs", "export", job_id, "-o", "export.json"]) == 0
    exported = json.loads((tmp_path / "export.json").read_text())
    assert exported["job"]["id"] == job_id
    assert len(exported["events"]) == store().get_job(job_id).last_seq
    assert exported["evaluations"]
    assert exported["rollouts"]

    assert run_cli(["jobs", "resume", job_id]) == 2
    assert "nothing to resume" in capsys.readouterr().err
    assert run_cli(["jobs", "pause", "nope"]) == 2
    assert "no job 'nope'" in capsys.readouterr().err


def test_the_live_chart(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["train", str(write(tmp_path / "job.toml")), "--stream-format", "chart"]) == 0
    err = capsys.readouterr().err
    assert "metric calls" in err
    assert "100%" in err
    assert "•" in err


@pytest.mark.slow  # starts processes: make test runs it, make check does not
def test_no_poll_runs_in_the_background(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = baseline_config(tmp_path / "job.toml", count=2)
    assert run_cli(["train", str(path), "--no-poll"]) == 0
    job_id = capsys.readouterr().out.strip()
    job = js.wait_until(
        lambda: (j := store().get_job(job_id)).state in ("succeeded", "failed") and j, 60
    )
    assert job.state == "succeeded", job.error
    assert (tmp_path / ".emery" / "logs" / f"{job_id}.log").is_file()


@pytest.mark.slow  # starts processes: make test runs it, make check does not
def test_poll_timeout_hands_the_job_to_the_background(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(js.DELAY_ENV, "0.05")
    path = baseline_config(tmp_path / "job.toml", count=12)
    assert run_cli(["train", str(path), "--poll-timeout", "0.5"]) == 0
    assert "continues in the background" in capsys.readouterr().err
    job_id = only_job_id()
    job = js.wait_until(
        lambda: (j := store().get_job(job_id)).state in ("succeeded", "failed") and j, 90
    )
    assert job.state == "succeeded", job.error
    kinds = [e.kind for e in store().list_events(job_id)]
    assert "paused" in kinds
    assert "resumed" in kinds


@pytest.mark.slow  # starts processes: make test runs it, make check does not
def test_ctrl_c_pauses_and_says_how_to_resume(tmp_path: Path) -> None:
    write(tmp_path / "job.toml", iterations=40)
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import jobs_support; jobs_support.register_random_search();"
            " from emery.cli.app import main; main(['train'])",
        ],
        cwd=tmp_path,
        env=js.worker_env(**{js.DELAY_ENV: "0.03"}),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        js.wait_until(
            lambda: (
                (tmp_path / ".emery" / "emery.db").exists()
                and (c := store().list_jobs().items)
                and store().get_checkpoint(c[0].id) is not None
            ),
            timeout=60,
        )
        os.kill(process.pid, signal.SIGINT)
        _, err = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 130, err
    job_id = only_job_id()
    assert f"paused; resume it with: emery jobs resume {job_id}" in err
    assert "Traceback" not in err
    job = store().get_job(job_id)
    assert (job.state, job.stop_reason) == ("paused", "interrupted (Ctrl-C)")


def test_a_bad_stream_format(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["train", str(write(tmp_path / "job.toml")), "--stream-format", "fancy"]) == 2
    assert "--stream-format must be cli, chart or none" in capsys.readouterr().err


def test_an_unknown_algorithm_section(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "job.toml")
    path.write_text(path.read_text() + "\n[algorithm.gepaa]\nseed = 1\n")
    assert run_cli(["train", str(path)]) == 2
    assert "unknown algorithm in [algorithm.gepaa]; did you mean 'gepa'?" in capsys.readouterr().err


def test_train_asks_which_config_when_someone_can_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from emery.cli import train_cmd

    write(tmp_path / "a.toml")
    write(tmp_path / "b.toml", iterations=1)
    monkeypatch.setattr(train_cmd, "interactive", lambda: True)
    monkeypatch.setattr(train_cmd.typer, "prompt", lambda *args, **kwargs: 2)
    assert run_cli(["train", "--stream-format", "none"]) == 0
    assert "2. b.toml" in capsys.readouterr().err
    [job] = store().list_jobs().items
    assert job.config_path == str(tmp_path / "b.toml")


def test_events_follow_a_running_job_until_it_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import emery

    monkeypatch.setenv(js.DELAY_ENV, "0.01")
    path = write(tmp_path / "job.toml", iterations=6)
    job = emery.Job.create(path, store=store()).start()
    assert run_cli(["jobs", "events", job.id, "--follow"]) == 0
    out = capsys.readouterr().out
    assert out.rstrip().endswith("succeeded (iterations done)")
    assert out.count("checkpoint") == 7
    job.wait()
