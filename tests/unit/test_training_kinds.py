"""SFT and RL jobs on the one job runtime, with a scripted trainer (no torch): every flag of
`emery train` and `emery jobs resume`, takeover of a dead run, the SDK, and the kinds."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path

import pytest
import training_support as ts

from emery.cli import foreground, train_cmd
from emery.cli.app import main
from emery.config.loading import load_config
from emery.core.errors import EmeryError
from emery.core.events import Event
from emery.jobs import manage
from emery.jobs.control import LOST
from emery.jobs.engine import JobEngine
from emery.jobs.kinds import KINDS, kind_of
from emery.jobs.training_engine import whole_job_stats
from emery.store import MemoryStore, SQLiteStore
from emery.store.protocol import Store
from emery.store.records import JobRecord, NewJob
from emery.training.rl_job import RLResult
from emery.training.trainer import TrainingStats

KINDS_TRAINED = ("sft", "rl")


def run_cli(args: list[str]) -> int:
    with pytest.raises(SystemExit) as info:
        main(args)
    code = info.value.code
    return code if isinstance(code, int) else (0 if code is None else 1)


@pytest.fixture
def trainer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ts.ScriptedTrainer:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("EMERY_STORE", raising=False)
    scripted = ts.ScriptedTrainer()
    ts.scripted_kinds(monkeypatch, tmp_path, scripted)
    return scripted


def config_file(tmp_path: Path, kind: str, **settings: object) -> str:
    path = tmp_path / f"{kind}.json"
    path.write_text(json.dumps(ts.training_config(tmp_path, kind, **settings)))
    return str(path)


def store() -> SQLiteStore:
    return SQLiteStore(Path(".emery") / "emery.db")


def only_job() -> JobRecord:
    [job] = store().list_jobs().items
    return job


def steps(job_id: str) -> list[int]:
    return [e.data["step"] for e in store().list_events(job_id, kinds=["train_loss"])]


@pytest.mark.parametrize("kind", KINDS_TRAINED)
def test_json_prints_only_the_result_and_the_progress_goes_to_stderr(
    kind: str, trainer: ts.ScriptedTrainer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(["train", config_file(tmp_path, kind), "--json"]) == 0
    captured = capsys.readouterr()
    payload = json.loads(captured.out)
    job = only_job()
    assert (job.kind, payload["job_id"]) == (kind, job.id)
    assert (payload["state"], payload["stop_reason"], payload["error"]) == (
        "succeeded",
        "max_steps",
        None,
    )
    assert payload["result"]["model"] == f"local/smollm2-135m+{job.id}"
    assert payload["result"]["training"]["steps"] == 4
    for line in ("created job", "started", "train_loss step=4", "adapter_saved", "succeeded"):
        assert line in captured.err


@pytest.mark.parametrize("kind", KINDS_TRAINED)
def test_stream_format_none_cli_and_chart(
    kind: str, trainer: ts.ScriptedTrainer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = config_file(tmp_path, kind)
    assert run_cli(["train", path, "--stream-format", "none"]) == 0
    captured = capsys.readouterr()
    assert "train_loss" not in captured.err
    assert "tuned model: local/smollm2-135m+" in captured.out  # the report still prints
    assert run_cli(["train", path, "--new", "--stream-format", "cli"]) == 0
    assert "train_loss step=1" in capsys.readouterr().err
    assert run_cli(["train", path, "--new", "--stream-format", "chart"]) == 0
    err = capsys.readouterr().err
    assert "· succeeded ·" in err  # the live display's header
    assert "train_loss step=1" not in err  # events only as its last few lines
    assert [job.state for job in store().list_jobs().items] == ["succeeded"] * 3


@pytest.mark.parametrize("kind", KINDS_TRAINED)
def test_poll_timeout_pauses_at_a_checkpoint_and_hands_the_job_to_a_worker(
    kind: str,
    trainer: ts.ScriptedTrainer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    trainer.hold_at = 3
    handed: list[str] = []

    def worker(store: Store, job_id: str) -> int:
        handed.append(manage.queued_for_run(store, job_id).id)
        return 4242

    monkeypatch.setattr(foreground, "spawn_job_process", worker)
    # step 3 waits for the pause the timeout asks for (on a loaded machine it may come
    # sooner: the trainer stops at whichever step it is on)
    args = ["train", config_file(tmp_path, kind), "--poll-timeout", "0.1", "--json"]
    assert run_cli(args) == 0
    payload = json.loads(capsys.readouterr().out)
    job = only_job()
    assert handed == [job.id]
    assert (payload["state"], payload["pid"]) == ("queued", 4242)
    assert payload["stop_reason"] == foreground.POLL_TIMEOUT
    done = steps(job.id)
    assert done == list(range(1, len(done) + 1))
    assert len(done) < 3
    trainer.hold_at = None
    assert run_cli(["jobs", "run", job.id]) == 0  # what the worker runs
    assert store().get_job(job.id).state == "succeeded"
    assert trainer.runs == [1, len(done) + 1]  # resumed from the checkpoint of the pause
    assert steps(job.id) == [1, 2, 3, 4]


@pytest.mark.parametrize("kind", KINDS_TRAINED)
def test_no_poll_prints_the_job_and_leaves_it_to_a_worker(
    kind: str,
    trainer: ts.ScriptedTrainer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(train_cmd, "spawn_job_process", lambda s, job_id: 4242)
    assert run_cli(["train", config_file(tmp_path, kind), "--no-poll", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    job = only_job()
    assert payload == {"job_id": job.id, "state": "created", "pid": 4242}
    assert trainer.runs == []
    assert run_cli(["train", config_file(tmp_path, kind), "--no-poll"]) == 0
    assert capsys.readouterr().out.strip() == job.id  # the unfinished job is resumed
    assert run_cli(["jobs", "run", job.id]) == 0
    assert store().get_job(job.id).state == "succeeded"


@pytest.mark.parametrize("kind", KINDS_TRAINED)
def test_a_job_whose_run_died_is_taken_over_from_its_checkpoint(
    kind: str, trainer: ts.ScriptedTrainer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = Path(config_file(tmp_path, kind))
    job = manage.create_job(store(), load_config(path), config_path=path)
    engine = kind_of(job).engine(store(), job.id)

    def die_after_step_3(events: Sequence[Event]) -> None:
        if any(e.kind == "train_loss" and e.data["step"] == 3 for e in events):
            engine.request(LOST)  # the run ends with no state change and no save, as a kill

    engine = kind_of(job).engine(store(), job.id, on_event=die_after_step_3)
    assert asyncio.run(engine.run()).state == "running"
    store().update_job(job.id, owner="gone-host:1", heartbeat_at=None)
    args = ["jobs", "resume", job.id, "--json", "--stream-format", "none"]
    assert run_cli(args) == 0
    assert json.loads(capsys.readouterr().out)["state"] == "succeeded"
    resumed = store().list_events(job.id, kinds=["resumed"])
    assert [e.data["reason"].split(":")[0] for e in resumed] == ["recovered"]
    assert trainer.runs == [1, 3]  # from the checkpoint at step 2: step 3 again, then 4
    assert steps(job.id) == [1, 2, 3, 3, 4]


def test_the_sdk_runs_a_training_job(trainer: ts.ScriptedTrainer, tmp_path: Path) -> None:
    from emery.sdk.job import Job

    job = Job.create(ts.training_config(tmp_path, "rl"), store=MemoryStore())
    record = job.start(wait=True).record()
    assert (record.kind, record.state) == ("rl", "succeeded")
    assert [e.data["step"] for e in job.events() if e.kind == "train_reward"] == [1, 2, 3, 4]
    result = job.result()
    assert isinstance(result, RLResult)
    assert result.model == f"local/smollm2-135m+{job.id}"


def test_every_kind_is_run_by_its_own_runtime(trainer: ts.ScriptedTrainer, tmp_path: Path) -> None:
    memory = MemoryStore()
    for kind in KINDS_TRAINED:
        job = memory.create_job(
            NewJob(id=f"j-{kind}", name=kind, kind=kind, algorithm=kind, config={})
        )
        with pytest.raises(EmeryError, match=f"j-{kind} is of kind {kind}, which this runtime"):
            asyncio.run(JobEngine(memory, job.id).run())
        assert memory.get_job(job.id).state == "created"
    prompt = memory.create_job(NewJob(id="j-p", name="p", algorithm="gepa", config={}))
    with pytest.raises(EmeryError, match="j-p is of kind optimize, which this runtime"):
        asyncio.run(KINDS["sft"].engine(memory, prompt.id).run())
    with pytest.raises(EmeryError, match="unknown job kind 'graph'"):
        kind_of(prompt.model_copy(update={"kind": "graph"}))


def test_a_resumed_run_reports_the_job_s_first_reward_and_loss() -> None:
    from emery.core.events import event

    memory = MemoryStore()
    memory.create_job(NewJob(id="j-rl", name="rl", kind="rl", algorithm="rl", config={}))
    killed_run = [(1, 0.25, 2.0), (2, 0.5, 1.5), (3, 0.5, 1.2)]
    for step, reward, loss in [*killed_run, (3, 0.75, 1.0)]:
        memory.append_events("j-rl", [event("train_reward", step=step, reward=reward, kl=0.0)])
        memory.append_events("j-rl", [event("train_loss", step=step, loss=loss)])
    resumed = TrainingStats.model_validate(
        ts._stats(3, 3, None).model_dump() | {"first_reward": 0.75, "last_reward": 0.75}
    )
    stats = whole_job_stats(memory, "j-rl", resumed)
    assert (stats.first_reward, stats.last_reward) == (0.25, 0.75)
    assert (stats.first_loss, stats.last_loss) == (2.0, 1.0 / 3)
    assert stats.first_val_loss is None


@pytest.mark.parametrize("kind", KINDS_TRAINED)
def test_report_shows_a_trained_job_and_refuses_what_it_cannot_show(
    kind: str, trainer: ts.ScriptedTrainer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = Path(config_file(tmp_path, kind))
    job = manage.create_job(store(), load_config(path), config_path=path)
    assert run_cli(["report", job.id]) == 2  # not trained yet
    assert capsys.readouterr().err.strip().endswith(f"a {kind} job reports once it succeeds")
    assert run_cli(["jobs", "run", job.id]) == 0
    capsys.readouterr()
    assert run_cli(["report", job.id]) == 0
    assert f"tuned model: local/smollm2-135m+{job.id}" in capsys.readouterr().out
    assert run_cli(["report", job.id, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["training"]["steps"] == 4
    assert run_cli(["report", job.id, "--html"]) == 2
    err = capsys.readouterr().err
    assert f"job {job.id} is a {kind} job: --html reports a prompt job" in err
    assert len(err.strip().splitlines()) == 1


def test_train_without_a_config_reads_the_one_it_finds_once(
    trainer: ts.ScriptedTrainer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ts.training_config(tmp_path, "sft")  # writes chats.jsonl
    (tmp_path / "sft.toml").write_text(
        '[job]\ntype = "sft"\n[sft]\ndata = "chats.jsonl"\nmax_steps = 2\nevaluate = false\n'
        '[dataset]\ntask = "word_problems"\nn_train = 4\nn_val = 0\nn_test = 2\n'
        '[lm.task]\nmodel = "local/smollm2-135m"\n[runtime]\nworkdir = "work"\n'
    )
    reads: list[str] = []
    read_text = Path.read_text

    def counted(path: Path, *args: object, **kwargs: object) -> str:
        reads.append(path.name)
        return read_text(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "read_text", counted)
    assert run_cli(["train", "--stream-format", "none"]) == 0
    assert "using sft.toml" in capsys.readouterr().err
    assert reads.count("sft.toml") == 1
    assert only_job().state == "succeeded"
