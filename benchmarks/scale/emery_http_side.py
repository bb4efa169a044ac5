"""emery's runners over HTTP: the scale workload through ``HttpQueue`` against ``emery server``.

Usage: python emery_http_side.py --store sqlite|postgresql://... --runners 8,32,128
                                 --rollouts 600 --ops 600 [--agent-s 1.0] [--kills 10]
                                 --out result.json

The runner's calls go over HTTP, as ``emery runner --server URL`` makes them:
``claim_rollout``, ``heartbeat_attempt``, ``add_traces`` (the attempt's spans) and
``finish_rollout``. ``HttpQueue`` sends two requests for them, ``POST /api/queue/claim``
and ``/finish`` carrying the spans (the heartbeat right after a claim renews a fresh lease
and is not sent); the server stores the spans and the result in its store's transactions.
Each runner
thread has its own ``HttpQueue`` (its own httpx connection pool), as N runner processes
would. The job side (``create_job``, ``add_rollouts``) writes the store directly, as a
``runners`` job writes its own queue.

The server is ``emery server --store ... --host 127.0.0.1`` (uvicorn, one worker; no API
key on loopback) in its own process, started fresh on a fresh store per measurement (a new
SQLite file, or emptied PostgreSQL tables).

``--kills K``: after the sweep, 200 rollouts (lease 3 s, 3 attempts) through 8 runner
threads that, like ``emery runner``, expire leases before each claim; K random claims are
"killed": half are abandoned (the runner dies: no heartbeat, no finish; a new runner with a
new ``HttpQueue`` and worker id takes its place), half stall past their lease and then send
their finish late. Checked: every rollout succeeded with exactly one kept result, the one
whose finish was answered ``kept``, and no rollout was kept twice.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from emery_side import EmerySide, finish_args, open_side_store, spans
from workload import SPANS, op_rates, run_runners

from emery.core.rollouts import Rollout, RolloutConfig
from emery.store.queue import RESULT_KEY, queue_metadata
from emery.store.records import RolloutFilter
from emery.store.sql import SqlStore
from emery.workers.http_queue import HttpQueue


class Server:
    """``emery server`` on a free port of 127.0.0.1 over ``location``."""

    def __init__(self, location: str) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = int(probe.getsockname()[1])
        command = [sys.executable, "-m", "emery", "server", "--store", location]
        self.process = subprocess.Popen(
            [*command, "--host", "127.0.0.1", "--port", str(port)], stderr=subprocess.DEVNULL
        )
        self.url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError("emery server did not start")

    def cpu_s(self) -> float:
        """CPU seconds the server process has used (user + system)."""
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class HttpSide(EmerySide):
    """One running job: its rollouts queued in ``store`` directly (the job side), the
    runner calls over HTTP through ``connect()``, one ``HttpQueue`` per runner thread."""

    def __init__(self, store: SqlStore, connect: Callable[[], HttpQueue]) -> None:
        super().__init__(store)
        self.connect = connect
        self.local = threading.local()
        self.queues: list[HttpQueue] = []
        self.lock = threading.Lock()

    def queue(self) -> HttpQueue:
        queue: HttpQueue | None = getattr(self.local, "queue", None)
        if queue is None:
            queue = self.local.queue = self.connect()
            with self.lock:
                self.queues.append(queue)
        return queue

    def claim(self, worker: str) -> Rollout | None:
        return self.queue().claim_rollout(worker, job_id=self.job_id)

    def update(self, handle: Rollout) -> None:
        self.queue().heartbeat_attempt(f"{handle.id}:{handle.attempt_count}")

    def add_spans(self, handle: Rollout, n: int) -> None:
        self.queue().add_traces([], [], spans(self.job_id, handle, n))

    def finish(self, handle: Rollout) -> None:
        self.queue().finish_rollout(*finish_args(handle))

    def finish_and_claim(self, handle: Rollout, worker: str) -> Rollout | None:
        """The finish and the worker's next claim in one request, as ``emery runner``
        sends them."""
        return self.queue().finish_and_claim(
            *finish_args(handle), worker_id=worker, job_id=self.job_id
        )[1]

    def close(self) -> None:
        for queue in self.queues:
            queue.close()
        self.store.close()


def location(kind: str, store: SqlStore) -> str:
    """What ``emery server --store`` takes for the side's store."""
    return kind if kind.startswith("postgres") else str(store.url)


def fresh(kind: str, folder: Path) -> tuple[HttpSide, Server]:
    store = open_side_store(kind, folder)
    server = Server(location(kind, store))
    return HttpSide(store, lambda: HttpQueue(server.url, timeout_s=600)), server


def kill_check(
    side: HttpSide, kills: int, rollouts: int = 200, runners: int = 8, lease_s: float = 3.0
) -> dict[str, Any]:
    """``kills`` random claims abandoned or finished late (module doc) on ``side``'s job;
    every rollout must end with exactly one kept result."""
    store = side.store
    queued = [
        Rollout(
            job_id=side.job_id,
            candidate_id="c1",
            example_id=f"k{i}",
            split="val",
            input={"question": f"q{i}"},
            config=RolloutConfig(max_attempts=3),
            metadata=queue_metadata("candidate:c1", 1, lease_s),
        )
        for i in range(rollouts)
    ]
    store.add_rollouts(queued)
    # kill the first attempt claimed at or after each of ``kills`` random claim ordinals
    doomed = set(random.Random(49).sample(range(rollouts - 2 * kills), kills))
    lock = threading.Lock()
    state = {"claims": 0, "due": 0, "killed": 0, "late_kept": 0}
    kept: Counter[str] = Counter()
    kept_by: dict[str, str] = {}
    done = threading.Event()

    def finished() -> bool:
        live = store.list_rollouts(
            RolloutFilter(job_id=side.job_id, status=["queuing", "preparing", "running"]),
            limit=1,
        )
        return not live.items

    def fate(handle: Rollout) -> str:
        """What becomes of a claim just made: abandon, late or run."""
        with lock:
            state["due"] += state["claims"] in doomed
            state["claims"] += 1
            if not state["due"] or handle.attempt_count != 1:
                return "run"
            state["due"] -= 1
            state["killed"] += 1
            return "abandon" if state["killed"] % 2 else "late"

    def runner(index: int) -> None:
        life = 0
        queue = side.connect()
        while not done.is_set():
            queue.expire_leases(job_id=side.job_id)  # as emery runner does before a claim
            handle = queue.claim_rollout(f"runner-{index}.{life}", job_id=side.job_id)
            if handle is None:
                if finished():
                    done.set()
                time.sleep(0.2)
                continue
            how = fate(handle)
            queue.heartbeat_attempt(f"{handle.id}:{handle.attempt_count}")
            queue.add_traces([], [], spans(side.job_id, handle, SPANS))
            if how == "abandon":  # the runner dies: a new one (new client, id) replaces it
                queue.close()
                queue = side.connect()
                life += 1
                continue
            if how == "late":
                time.sleep(1.5 * lease_s)  # stalled past its lease, then finishes
            rollout_id, attempt_id, end = finish_args(handle)
            if queue.finish_rollout(rollout_id, attempt_id, end):
                with lock:
                    kept[handle.id] += 1
                    kept_by[handle.id] = attempt_id
                    state["late_kept"] += how == "late"
        queue.close()

    threads = [threading.Thread(target=runner, args=(i,)) for i in range(runners)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - start
    rows = store.list_rollouts(RolloutFilter(job_id=side.job_id), limit=None).items
    unresponsive = sum(
        1 for r in rows for a in store.list_attempts(r.id) if a.status == "unresponsive"
    )
    stored_by = {r.id: (r.metadata or {}).get(RESULT_KEY, {}).get("attempt") for r in rows}
    retried = sum(1 for r in rows if r.attempt_count > 1)
    problems = [r.id for r in rows if r.status != "succeeded" or kept[r.id] != 1]
    problems += [rid for rid, attempt in kept_by.items() if stored_by.get(rid) != attempt]
    return {
        "rollouts": len(rows),
        "kills": kills,
        "killed": state["killed"],
        "abandoned": (state["killed"] + 1) // 2,
        "finished_late": state["killed"] // 2,
        "late_finish_kept": state["late_kept"],
        "retried_rollouts": retried,
        "unresponsive_attempts": unresponsive,
        "kept_twice": sum(1 for n in kept.values() if n > 1),
        "kept_never": sum(1 for r in rows if kept[r.id] == 0),
        "mismatched": len(problems),
        "seconds": elapsed,
        "ok": len(rows) == rollouts and not problems and state["killed"] == kills,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", required=True, help="sqlite, or a PostgreSQL URL")
    parser.add_argument("--runners", default="8,32,128")
    parser.add_argument("--rollouts", type=int, default=600)
    parser.add_argument("--ops", type=int, default=600)
    parser.add_argument("--agent-s", type=float, default=0.0)
    parser.add_argument("--kills", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    result: dict[str, Any] = {"runners": {}}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        if args.ops:
            side, server = fresh(args.store, folder)
            try:
                result["ops"] = op_rates(side, args.ops)
            finally:
                side.close()
                server.stop()
        for n in (int(x) for x in args.runners.split(",") if x):
            side, server = fresh(args.store, folder)
            try:
                cpu, own, wall = server.cpu_s(), time.process_time(), time.perf_counter()
                got = run_runners(side, n, args.rollouts, args.agent_s)
                wall = time.perf_counter() - wall
                # the share of one core each process used: the server is one uvicorn worker
                got["server_cpu"] = (server.cpu_s() - cpu) / wall
                got["client_cpu"] = (time.process_time() - own) / wall
                result["runners"][str(n)] = got
            finally:
                side.close()
                server.stop()
        if args.kills:
            side, server = fresh(args.store, folder)
            try:
                result["kills"] = kill_check(side, args.kills)
            finally:
                side.close()
                server.stop()
    args.out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
