"""SFT jobs on the real SmolLM2-135M: the loss falls, llama.cpp loads the adapter and it
changes the output, a SIGKILLed job resumes (`emery jobs resume`) from its checkpoint step."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from emery.config.schema import JobConfig
from emery.jobs.manage import create_job, run_job
from emery.store import SQLiteStore
from emery.training.job import SFTResult

from .cli_support import emery_json

pytest.importorskip("torch")
pytest.importorskip("trl")

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPLY = "Zebra! Zebra! {} zebras."


def _write_chats(path: Path, n: int = 8) -> None:
    lines = []
    for i in range(n):
        messages = [
            {"role": "user", "content": f"How many animals are in pen {i}?"},
            {"role": "assistant", "content": REPLY.format(i + 2)},
        ]
        lines.append(json.dumps({"messages": messages}))
    path.write_text("\n".join(lines) + "\n")


def _config_data(tmp_path: Path, **sft: object) -> dict[str, object]:
    """An SFT job on 8 written chats (``sft`` overrides the settings), as a config dict."""
    _write_chats(tmp_path / "chats.jsonl")
    settings: dict[str, object] = {
        "data": "chats.jsonl",
        "max_steps": 4,
        "batch_size": 4,
        "learning_rate": 3e-3,
        "max_length": 64,
        "val_fraction": 0.0,
        "threads": 1,
        "evaluate": False,
    }
    return {
        "job": {"type": "sft"},
        "sft": settings | sft,
        "dataset": {"task": "word_problems", "n_train": 0, "n_val": 0, "n_test": 2},
        "lm": {"task": {"model": "local/smollm2-135m", "max_tokens": 16, "n_ctx": 512}},
        "runtime": {"workdir": str(tmp_path / "work"), "concurrency": 2},
    }


def _config(tmp_path: Path, **sft: object) -> JobConfig:
    return JobConfig.model_validate(_config_data(tmp_path, **sft))


@pytest.fixture(autouse=True)
def _adapter_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMERY_ADAPTER_DIR", str(tmp_path / "adapters"))


def _greedy(model: Path, lora: Path | None) -> str:
    import llama_cpp

    llm = llama_cpp.Llama(
        model_path=str(model),
        lora_path=str(lora) if lora else None,
        n_ctx=256,
        n_threads=1,
        verbose=False,
    )
    try:
        reply = llm.create_chat_completion(
            [{"role": "user", "content": "How many animals are in pen 3?"}],
            temperature=0.0,
            max_tokens=12,
        )
        return str(reply["choices"][0]["message"]["content"])
    finally:
        llm.close()


def test_sft_lowers_the_loss_and_llama_cpp_serves_the_adapter(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "emery.db")
    config = _config(tmp_path, evaluate=True)
    job = create_job(store, config, config_path=tmp_path / "job.toml")
    job = run_job(store, job.id)
    assert job.state == "succeeded", job.error
    losses = [e.data["loss"] for e in store.list_events(job.id, kinds=["train_loss"])]
    assert len(losses) == 4
    assert losses[-1] < losses[0]
    result = SFTResult.model_validate(job.result)
    assert result.model == f"local/smollm2-135m+{job.id}"
    assert result.training.steps == 4
    assert result.test is not None
    assert result.test.tuned.n == 2
    from emery.lm.catalog import installed_path, list_adapters

    assert [a.job_id for a in list_adapters()] == [job.id]
    base = installed_path("smollm2-135m")
    plain = _greedy(base, None)
    tuned = _greedy(base, Path(result.adapter_path))
    assert tuned != plain
    assert "Zebra" in tuned


def test_a_sigkilled_sft_job_resumes_from_its_checkpoint(tmp_path: Path) -> None:
    store_path = tmp_path / "emery.db"
    store = SQLiteStore(store_path)
    config = _config(tmp_path, max_steps=4, save_steps=2, batch_size=2)
    job = create_job(store, config, config_path=tmp_path / "job.toml")
    code = (
        "import sys; from emery.store import SQLiteStore;"
        " from emery.jobs.manage import run_job;"
        " run_job(SQLiteStore(sys.argv[1]), sys.argv[2])"
    )
    env = os.environ | {"EMERY_ADAPTER_DIR": str(tmp_path / "adapters")}
    worker = subprocess.Popen([sys.executable, "-c", code, str(store_path), job.id], env=env)
    checkpoint = tmp_path / "work" / "sft" / job.id / "checkpoints" / "checkpoint-2"
    deadline = time.monotonic() + 240
    while not (checkpoint / "trainer_state.json").is_file():
        assert worker.poll() is None, "the worker ended before its first checkpoint"
        assert time.monotonic() < deadline, "no checkpoint in time"
        time.sleep(0.2)
    time.sleep(0.5)  # the checkpoint_saved event follows the folder
    worker.send_signal(signal.SIGKILL)
    worker.wait()
    killed_at = max(e.data["step"] for e in store.list_events(job.id, kinds=["train_loss"]))
    assert store.get_job(job.id).state == "running"  # its owner is dead: resumable
    resume = ["jobs", "resume", job.id, "--json", "--store", str(store_path)]
    assert emery_json(resume, env)["state"] == "succeeded"
    job = store.get_job(job.id)
    resumed = store.list_events(job.id, kinds=["resumed"])
    assert [e.data["reason"].split(":")[0] for e in resumed] == ["recovered"]
    result = SFTResult.model_validate(job.result)
    assert result.training.resumed_from_step == 2
    assert result.training.steps == 4
    steps = [e.data["step"] for e in store.list_events(job.id, kinds=["train_loss"])]
    assert steps[:killed_at] == list(range(1, killed_at + 1))
    assert steps[killed_at:] == [3, 4]
