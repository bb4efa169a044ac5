"""`emery train` on the real embedded model (SmolLM2-135M) exits cleanly: Ctrl-C while the
model decodes pauses the job and exits 130 (not a segfault in llama.cpp's teardown), and a
normal run exits 0; either way the decoder thread is stopped before the interpreter ends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from emery.store import SQLiteStore

pytestmark = pytest.mark.integration

CONFIG = """
[job]
name = "teardown"
algorithm = "baseline"

[job.budget]
metric_calls = {calls}

[dataset]
task = "word_problems"
n_train = 0
n_val = {n_val}
n_test = 0

[lm.task]
model = "local/smollm2-135m"
max_tokens = {max_tokens}
n_ctx = 1024
n_parallel = {slots}
cache = false

[runtime]
concurrency = 4
"""

DECODING = "rollouts"  # the progress line shows once the first rollout has finished


def _train(folder: Path, *, n_val: int, max_tokens: int, slots: int) -> subprocess.Popen[str]:
    (folder / "job.toml").write_text(
        CONFIG.format(calls=4 * n_val, n_val=n_val, max_tokens=max_tokens, slots=slots)
    )
    env = {**os.environ, "PYTHONFAULTHANDLER": "1", "COLUMNS": "200"}
    return subprocess.Popen(
        [sys.executable, "-m", "emery", "train", "job.toml"],
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for_line(process: subprocess.Popen[str], marker: str, timeout_s: float) -> list[str]:
    """Read stderr until a line holds ``marker``; the lines read (the rest keeps draining)."""
    assert process.stderr is not None
    lines: list[str] = []
    seen = threading.Event()

    def read() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            lines.append(line)
            if marker in line:
                seen.set()
        seen.set()  # stderr closed: the process ended

    threading.Thread(target=read, daemon=True).start()
    assert seen.wait(timeout_s), f"no {marker!r} line within {timeout_s} s: {lines}"
    return lines


def _job_state(folder: Path) -> str:
    store = SQLiteStore(folder / ".emery" / "emery.db")
    (job,) = store.list_jobs().items
    return job.state


def test_ctrl_c_while_the_model_decodes_pauses_the_job_and_exits_130(tmp_path: Path) -> None:
    # One slot: the first rollout ends soon, the other three wait or decode when Ctrl-C comes.
    train = _train(tmp_path, n_val=40, max_tokens=16, slots=1)
    lines = _wait_for_line(train, DECODING, timeout_s=240)
    assert train.poll() is None, "".join(lines)
    train.send_signal(signal.SIGINT)
    code = train.wait(timeout=120)
    assert code == 130, f"exit {code}:\n{''.join(lines)}"
    assert _job_state(tmp_path) == "paused"


def test_a_finished_run_exits_0(tmp_path: Path) -> None:
    train = _train(tmp_path, n_val=2, max_tokens=8, slots=2)
    lines = _wait_for_line(train, "never printed", timeout_s=240)
    code = train.wait(timeout=60)
    assert code == 0, f"exit {code}:\n{''.join(lines)}"
    assert _job_state(tmp_path) == "succeeded"
