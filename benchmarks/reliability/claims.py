"""Twelve pause and resume requests at once to a job that ``emery server`` runs in job
processes (issue 50, item 1): at most one worker works on the job at any moment (a worker
that lost the job exits before it builds the job's run), every answer is a 200 or a 409
that says who has the job, and the job still succeeds.

Usage: python benchmarks/reliability/claims.py [--rounds 4] [--verbose]

Each round: a GEPA job on the scripted models (``task_lm`` and ``reflection_lm`` here:
``scripted_lm``'s, each model made and each call logged with the worker's pid and time:
its work, from building the job's run to its last call), posted to a server over a
SQLite store; once it runs, six pauses and six resumes at once (from running in odd
rounds; in even rounds from paused: it is paused first); then resumes until it succeeds.
Worker processes (``emery jobs run JOB``) are sampled from ``/proc`` every 20 ms. Exits 1
when a round finds two workers' work interleaved, a 5xx or a 409 without a reason, or a
job that did not succeed."""

from __future__ import annotations

import argparse
import itertools
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from scripted_lm import PacedLM, reflection_reply, task_reply  # noqa: E402
from search_jobs import emery_command, emery_env, search_config  # noqa: E402

from emery.core.models import ChatMessage  # noqa: E402
from emery.lm.base import Completion  # noqa: E402

WORK_LOG_ENV = "EMERY_CLAIMS_WORK_LOG"
REASONS = ("already", "came first")
"""What a 409 to a resume says: which run has the job, or which request won."""


def log_work() -> None:
    """Append ``pid time`` to ``$EMERY_CLAIMS_WORK_LOG``: this process works on the job."""
    path = os.environ.get(WORK_LOG_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as log:
            log.write(f"{os.getpid()} {time.time():.4f}\n")


class WorkLoggedLM(PacedLM):
    """``PacedLM`` that logs each call it answers as work (``log_work``)."""

    async def complete(self, messages: Sequence[ChatMessage], **params: Any) -> Completion:
        log_work()
        return await super().complete(messages, **params)


def task_lm() -> WorkLoggedLM:
    """The scripted task model; making it is work too (a worker building the job's run)."""
    log_work()
    return WorkLoggedLM(task_reply, model="scripted-task")


def reflection_lm() -> WorkLoggedLM:
    log_work()
    return WorkLoggedLM(reflection_reply, model="scripted-reflection")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Processes:
    """Samples ``/proc`` for live ``emery jobs run JOB`` processes: pid → (first, last seen)."""

    def __init__(self, job_id: str) -> None:
        self.job_id = job_id
        self.seen: dict[int, list[float]] = {}
        self.most_alive = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Processes:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            alive = [pid for pid in _pids() if _runs(pid, self.job_id)]
            self.most_alive = max(self.most_alive, len(alive))
            for pid in alive:
                self.seen.setdefault(pid, [time.time(), 0.0])[1] = time.time()


def _pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _runs(pid: int, job_id: str) -> bool:
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z" and b"run" in command and job_id.encode() in command


def work_windows(log: Path) -> dict[int, tuple[float, float]]:
    """pid → (first, last) work of each worker that did any."""
    windows: dict[int, tuple[float, float]] = {}
    for line in log.read_text().splitlines() if log.exists() else []:
        pid_text, at_text = line.split()
        pid, at = int(pid_text), float(at_text)
        first, last = windows.get(pid, (at, at))
        windows[pid] = (min(first, at), max(last, at))
    return windows


def overlaps(windows: dict[int, tuple[float, float]]) -> list[str]:
    """Pairs of workers whose model calls interleaved."""
    spans = sorted(windows.items(), key=lambda item: item[1])
    return [
        f"pid {a} ({a_first:.2f}-{a_last:.2f}) and pid {b} (from {b_first:.2f})"
        for (a, (a_first, a_last)), (b, (b_first, _)) in itertools.pairwise(spans)
        if b_first < a_last
    ]


def burst(client: httpx.Client, job_id: str) -> list[tuple[str, int, str]]:
    """Six pauses and six resumes at once: (action, status, state or reason) each."""
    barrier = threading.Barrier(12)
    answers: list[tuple[str, int, str]] = []

    def ask(action: str) -> None:
        barrier.wait(30)
        response = client.post(f"/api/jobs/{job_id}/{action}")
        body = response.json()
        answers.append((action, response.status_code, body.get("state") or body.get("detail")))

    threads = [
        threading.Thread(target=ask, args=("pause" if n % 2 else "resume",)) for n in range(12)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return answers


def wait_state(client: httpx.Client, job_id: str, states: Sequence[str], timeout_s: float) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        state = str(client.get(f"/api/jobs/{job_id}").json()["state"])
        if state in states:
            return state
        time.sleep(0.05)
    return str(client.get(f"/api/jobs/{job_id}").json()["state"])


def round_problems(number: int, root: Path, verbose: bool) -> list[str]:
    """Run one round in ``root``; what went wrong."""
    folder = root / f"round-{number}"
    folder.mkdir()
    work_log = folder / "work.log"
    env = emery_env(delay_s=0.05) | {WORK_LOG_ENV: str(work_log)}
    port = free_port()
    server = subprocess.Popen(
        emery_command(
            "server", "--port", str(port), "--store", str(folder / "emery.db"), "--allow-code"
        ),
        cwd=folder,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    text = search_config("gepa", folder / "work", cache=False, metric_calls=120)
    text = text.replace("python/scripted_lm:", "python/claims:")
    problems: list[str] = []
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=90) as client:
            _wait_up(client)
            made = client.post("/api/jobs", json={"config": tomllib.loads(text)})
            if made.status_code != 201:
                return [f"create: {made.status_code} {made.text[:200]}"]
            job_id = made.json()["id"]
            with Processes(job_id) as processes:
                wait_state(client, job_id, ("running",), 60)
                if number % 2 == 0:
                    client.post(f"/api/jobs/{job_id}/pause", params={"wait": 30})
                answers = burst(client, job_id)
                end = _drive_to_end(client, job_id)
            problems += _check_answers(answers)
            if end != "succeeded":
                problems.append(f"the job ended {end}")
            windows = work_windows(work_log)
            problems += [f"two workers at work at once: {pair}" for pair in overlaps(windows)]
            print(
                f"round {number}: {len(processes.seen)} job processes, {len(windows)} did"
                f" work, at most {processes.most_alive} alive at once; answers:"
                f" {_tally(answers)}; job {end}"
            )
            if verbose:
                for action, status, detail in answers:
                    print(f"  {action} {status} {detail}")
    finally:
        server.terminate()
        _, stderr = server.communicate(timeout=30)
        if "Traceback" in stderr:
            problems.append("the server printed a traceback")
    return problems


def _wait_up(client: httpx.Client) -> None:
    for _ in range(300):
        try:
            if client.get("/health").status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise SystemExit("the server did not start")


def _drive_to_end(client: httpx.Client, job_id: str) -> str:
    """Resume the job whenever it is paused, until it ends (or 180 s pass)."""
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        state = wait_state(client, job_id, ("paused", "succeeded", "failed", "cancelled"), 5)
        if state == "paused":
            client.post(f"/api/jobs/{job_id}/resume")
        elif state in ("succeeded", "failed", "cancelled"):
            return state
    return wait_state(client, job_id, (), 0)


def _check_answers(answers: list[tuple[str, int, str]]) -> list[str]:
    problems = []
    for action, status, detail in answers:
        if status >= 500 or status not in (200, 409):
            problems.append(f"{action}: {status} {detail}")
        elif status == 409 and not any(reason in str(detail) for reason in REASONS):
            problems.append(f"{action}: 409 without saying who has the job: {detail}")
    return problems


def _tally(answers: list[tuple[str, int, str]]) -> str:
    counts: dict[str, int] = {}
    for action, status, detail in answers:
        key = f"{action} {status}" + (f" {detail}" if status == 200 else "")
        counts[key] = counts.get(key, 0) + 1
    return ", ".join(f"{key}: {count}" for key, count in sorted(counts.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--verbose", action="store_true", help="print every answer")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="emery-claims-"))
    problems = []
    for number in range(1, args.rounds + 1):
        problems += [f"round {number}: {p}" for p in round_problems(number, root, args.verbose)]
    for problem in problems:
        print(f"FAIL {problem}")
    print(json.dumps({"rounds": args.rounds, "problems": len(problems)}))
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
