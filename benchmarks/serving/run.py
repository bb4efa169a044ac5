"""Serving a published two-stage program: ``POST /systems/NAME/run`` against ``emery run``.

A plan → solve prompt program (``mock_models.planner_solver``, a scripted model with no
latency of its own) is run as a baseline job on the word problems, published, and served
by an ``emery server`` process on 127.0.0.1 over a SQLite store. For ``--inputs``
questions it checks that the route's output equals what ``emery run JOB`` gives
(``reports.inference.run_inference``, the job's best), then measures the route's overhead:
each request's round trip minus the same system run in-process (``ServedSystem.run``: the
same candidate, model and parsing, no HTTP, no span write), paired per request, over
``--rounds`` rounds of the inputs. Prints one table.

    .venv/bin/python benchmarks/serving/run.py --inputs 50 --rounds 4
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from emery.config import parse_config
from emery.data.tasks import builtin_task
from emery.jobs import create_job, run_job
from emery.reports import published
from emery.reports.inference import run_inference
from emery.reports.served import ServedSystem
from emery.store import SQLiteStore

HERE = Path(__file__).resolve().parent
NAME = "plan-solve"


def job_config(workdir: Path) -> dict[str, Any]:
    return {
        "job": {"algorithm": "baseline"},
        "dataset": {"task": "word_problems", "n_train": 0, "n_val": 4, "n_test": 4},
        "system": {
            "kind": "prompt_program",
            "stages": [
                {
                    "name": "plan",
                    "instruction": "Write a one-line plan.",
                    "messages": [{"template": "Question: {question}"}],
                },
                {
                    "name": "solve",
                    "instruction": "Solve using the plan. End with 'Answer: <number>'.",
                    "messages": [{"template": "Question: {question}\nPlan: {plan}"}],
                    "parser": {"kind": "regex", "pattern": r"Answer:\s*(-?\d+)"},
                },
            ],
        },
        "verifier": {"kind": "numeric"},
        "lm": {"task": {"model": "python/mock_models:planner_solver"}},
        "runtime": {"workdir": str(workdir / ".emery")},
    }


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inputs", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    with tempfile.TemporaryDirectory() as folder:
        workdir = Path(folder)
        path = workdir / "emery.db"
        store = SQLiteStore(path)
        config = job_config(workdir)
        job = create_job(store, parse_config(config), given=config, base_dir=HERE)
        assert run_job(store, job.id).state == "succeeded"
        prompt = published.publish(store, job.id, NAME)
        data = builtin_task("word_problems").dataset(seed=7, n_train=0, n_val=0, n_test=args.inputs)
        questions = [{"question": e.input["question"]} for e in data.test]
        port = free_port()
        server = subprocess.Popen(
            [sys.executable, "-m", "emery", "server", "--store", str(path), "--port", str(port)],
            env={**os.environ, "PYTHONPATH": str(HERE)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            url = f"http://127.0.0.1:{port}/systems/{NAME}/run"
            with httpx.Client(timeout=30) as client:
                wait_up(client, port)
                same = 0
                for inputs in questions:
                    expected = asyncio.run(run_inference(store, job.id, inputs))
                    got = client.post(url, json={"input": inputs}).json()["output"]
                    same += got == expected
                direct = ServedSystem.of(prompt, store)
                overhead, http_ms, direct_ms = [], [], []
                for _ in range(args.rounds):
                    for inputs in questions:
                        started = time.perf_counter()
                        asyncio.run(direct.run(inputs))
                        inner = (time.perf_counter() - started) * 1000
                        started = time.perf_counter()
                        client.post(url, json={"input": inputs}).raise_for_status()
                        outer = (time.perf_counter() - started) * 1000
                        direct_ms.append(inner)
                        http_ms.append(outer)
                        overhead.append(outer - inner)
        finally:
            server.terminate()
            server.wait(timeout=10)
    load = os.getloadavg()[0]
    print(f"outputs equal to `emery run JOB`: {same}/{len(questions)}")
    print(f"requests: {len(overhead)} ({args.rounds} rounds of {len(questions)} inputs)")
    print("| | p50 ms | p95 ms | mean ms |")
    print("| --- | --- | --- | --- |")
    for label, values in (("direct run", direct_ms), ("route", http_ms), ("overhead", overhead)):
        print(
            f"| {label} | {percentile(values, 0.5):.2f} | {percentile(values, 0.95):.2f}"
            f" | {statistics.fmean(values):.2f} |"
        )
    print(f"1-minute load average at the end: {load:.2f} (2 cores)")


def wait_up(client: httpx.Client, port: int, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if client.get(f"http://127.0.0.1:{port}/health").status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise SystemExit("the server did not start")


if __name__ == "__main__":
    main()
