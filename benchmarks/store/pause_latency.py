"""Time from a pause request in another process to the engine reporting the job paused.

A job process runs a job whose steps are long (a scripted model that takes
``--lm-delay`` seconds per call); once it has stored a checkpoint, another process asks for
a pause, and the clock stops when the job row says ``paused``. Two ways of asking, side by
side:

- ``emery jobs pause JOB`` as a new process (what a user types: includes starting Python);
- ``pause_job(store, JOB)`` from an already running process (the engine's own reaction).

    .venv/bin/python benchmarks/store/pause_latency.py --trials 5
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from emery.config import parse_config
from emery.core.models import ChatMessage
from emery.jobs import create_job, pause_job
from emery.lm import FakeLM
from emery.lm.base import Completion
from emery.store import SQLiteStore

HERE = Path(__file__).resolve().parent
DELAY_ENV = "EMERY_BENCH_LM_DELAY"


class SlowLM(FakeLM):
    """Answers every question with 'Answer: 1' after a fixed delay."""

    async def complete(self, messages: Sequence[ChatMessage], **params: Any) -> Completion:
        await asyncio.sleep(float(os.environ.get(DELAY_ENV, "0.2")))
        return await super().complete(messages, **params)


def slow_lm() -> FakeLM:
    return SlowLM(lambda messages: "Answer: 1", model="bench/slow")


def config(workdir: Path) -> dict[str, Any]:
    return {
        "job": {"algorithm": "baseline"},
        "dataset": {"task": "word_problems", "n_train": 0, "n_val": 4, "n_test": 0},
        "lm": {"task": {"model": "python/pause_latency:slow_lm", "cache": False}},
        "runtime": {"workdir": str(workdir), "concurrency": 4},
        "algorithm": {"baseline": {"candidates": [{"solve": f"Variant {i}."} for i in range(200)]}},
    }


def env(delay: float) -> dict[str, str]:
    paths = [str(HERE), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths), DELAY_ENV: str(delay)}


def one_trial(store: SQLiteStore, folder: Path, delay: float, via_cli: bool) -> float:
    data = config(folder / ".emery")
    job_id = create_job(store, parse_config(data), given=data, base_dir=folder).id
    worker = subprocess.Popen(
        [sys.executable, "-m", "emery", "jobs", "run", job_id, "--store", str(store.path)],
        env=env(delay),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while store.get_checkpoint(job_id) is None:
            if time.monotonic() > deadline:
                raise RuntimeError("the worker stored no checkpoint within 60 s")
            time.sleep(0.05)
        time.sleep(delay / 2)  # land in the middle of a step
        started = time.perf_counter()
        if via_cli:
            command = ["jobs", "pause", job_id, "--no-wait", "--store", str(store.path)]
            subprocess.Popen(
                [sys.executable, "-m", "emery", *command], env=env(delay), stdout=subprocess.DEVNULL
            )
        else:
            pause_job(store, job_id, wait_s=0)
        while store.get_job(job_id).state != "paused":
            if time.perf_counter() - started > 60:
                raise RuntimeError("the job did not pause within 60 s")
            time.sleep(0.002)
        elapsed = time.perf_counter() - started
        worker.wait(timeout=60)
        return elapsed
    finally:
        worker.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--lm-delay", type=float, default=0.5, help="seconds per model call")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="emery-pause-"))
    store = SQLiteStore(folder / "emery.db")
    rows = []
    for label, via_cli in (("pause_job() in a running process", False), ("emery jobs pause", True)):
        times = [one_trial(store, folder, args.lm_delay, via_cli) for _ in range(args.trials)]
        rows.append((label, times))
    print(f"pause latency, {args.trials} trials each, model calls of {args.lm_delay}s (a step")
    print("is one model call wide, so without mid-step cancellation a pause would take that)")
    print(f"{'request':<36}{'median':>10}{'max':>10}")
    for label, times in rows:
        print(f"{label:<36}{statistics.median(times):>9.3f}s{max(times):>9.3f}s")
    engine = statistics.median(rows[0][1])
    print(f"the engine pauses in {engine / args.lm_delay:.2f}x the length of one model call")


if __name__ == "__main__":
    main()
