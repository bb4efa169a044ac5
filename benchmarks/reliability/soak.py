"""A long day: one job of ``--rollouts`` rollouts against the mock OpenAI-compatible
endpoint, with ``emery server`` reading the same SQLite store, then ``emery store prune``.

    nice -n 10 .venv/bin/python benchmarks/reliability/soak.py --rollouts 100000
    .venv/bin/python benchmarks/reliability/soak.py --rollouts 2000 --val 500   # a short run

Three processes besides this one: the mock endpoint of ``benchmarks/efficiency/
mock_endpoint.py`` (no latency unless ``--latency``), ``emery server --store soak.db``
and the job's process (this script with ``--child``), which runs one ``baseline`` job
through ``emery.optimize``: the seed and ``rollouts / val - 1`` given candidates (each a
new instruction, so every prompt is new to the response cache), each scored on the ``val``
examples of "What is A + B?" as one step that is committed with its rollouts, attempts and
spans. This script plays a dashboard meanwhile (every ``--poll`` seconds: the jobs list,
the job, its candidates and its new events, through the server) and samples every
process's resident memory (``VmRSS``) and the store's files. Each time the stored rollouts
pass a multiple of ``--every`` it prints a row: rollouts, both processes' RSS, the
store's bytes (file and WAL). At the end: bytes per rollout (the file after a WAL
checkpoint, over the stored rollouts, their attempts and spans counted), then ``emery
store prune --older-than 0 --json`` on the finished job (the server still up) and the
space it gave back. ``--json PATH`` writes every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "efficiency"))

import httpx  # noqa: E402
from mock_endpoint import BackgroundServer  # noqa: E402

from emery.proxy.serving import free_port  # noqa: E402

INSTRUCTION = "Add the two numbers. End with a line 'Answer: <number>'."


def rss_kib(pid: int) -> int | None:
    """A process's resident memory in KiB (``VmRSS``), None once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def store_bytes(path: Path) -> tuple[int, int]:
    """(the SQLite file's bytes, its WAL's bytes)."""
    wal = Path(f"{path}-wal")
    return (
        path.stat().st_size if path.exists() else 0,
        wal.stat().st_size if wal.exists() else 0,
    )


def count(path: Path, sql: str, *args: Any) -> int:
    """One count from the store, read-only (the job and the server keep writing)."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30) as conn:
        return int(conn.execute(sql, args).fetchone()[0])


def run_child(args: argparse.Namespace) -> None:
    """The job's process: one baseline job of ``args.rollouts`` rollouts."""
    import emery
    from emery.core.models import Dataset, Example
    from emery.systems.parsers import ParserConfig
    from emery.systems.prompt_program import (
        MessageTemplate,
        PromptProgram,
        PromptProgramConfig,
        StageConfig,
    )

    program = PromptProgram(
        PromptProgramConfig(
            name="soak",
            stages=[
                StageConfig(
                    name="solve",
                    instruction=INSTRUCTION,
                    messages=[MessageTemplate(template="{question}")],
                    parser=ParserConfig(kind="regex", pattern=r"Answer:\s*(-?\d+)"),
                )
            ],
        )
    )
    pairs = [(a, b) for a in range(10, 100) for b in range(10, 100)]
    val = [
        Example(id=f"v{i}", input={"question": f"What is {a} + {b}?"}, expected=a + b)
        for i, (a, b) in enumerate(pairs[: args.val])
    ]
    steps = max(1, args.rollouts // args.val)
    candidates = [{"solve": f"{INSTRUCTION} (variant {i})"} for i in range(1, steps)]
    emery.optimize(
        program,
        Dataset(name="soak", val=val),  # no test split: every rollout is a val step's
        algorithm="baseline",
        settings={"candidates": candidates},
        lm={
            "model": "openai/mock-task",
            "base_url": args.url,
            "api_key": "not-needed",
            "concurrency": args.concurrency,
            "max_attempts": 2,
        },
        verifier="numeric",
        runtime={"concurrency": args.concurrency, "workdir": str(args.workdir)},
        store=str(args.store),
        name="soak",
        progress=False,
    )


class Dashboard(threading.Thread):
    """The dashboard's calls every ``poll_s``: jobs list, the job, candidates, new events."""

    def __init__(self, base: str, poll_s: float) -> None:
        super().__init__(daemon=True)
        self.base, self.poll_s = base, poll_s
        self.stop = threading.Event()
        self.calls = self.errors = 0
        self.latencies: list[float] = []
        self.events_seen = 0

    def run(self) -> None:
        since = 0
        with httpx.Client(base_url=self.base, timeout=120) as client:
            while not self.stop.wait(self.poll_s):
                try:
                    jobs = self._get(client, "/api/jobs", limit=200)["jobs"]
                    if not jobs:
                        continue
                    job = jobs[0]["id"]
                    self._get(client, f"/api/jobs/{job}")
                    self._get(client, f"/api/jobs/{job}/candidates")
                    events = self._get(client, f"/api/jobs/{job}/events", since=since)["events"]
                    self.events_seen += len(events)
                    since = events[-1]["seq"] if events else since
                except (httpx.HTTPError, KeyError, ValueError):
                    self.errors += 1

    def _get(self, client: httpx.Client, path: str, **params: Any) -> Any:
        began = time.perf_counter()
        answer = client.get(path, params=params)
        self.latencies.append(time.perf_counter() - began)
        self.calls += 1
        answer.raise_for_status()
        return answer.json()


def start_server(store: Path, folder: Path) -> tuple[subprocess.Popen[bytes], str]:
    """``emery server`` over the store; its process and base URL."""
    port = free_port()
    command = [sys.executable, "-m", "emery", "server", "--port", str(port), "--store", str(store)]
    process = subprocess.Popen(command, cwd=folder, stdout=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            httpx.get(f"{base}/health", timeout=5).raise_for_status()
            return process, base
        except httpx.HTTPError:
            time.sleep(0.3)
    process.kill()
    raise SystemExit(f"emery server on {base} did not start")


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def soak(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    store = folder / "soak.db"
    rows: list[dict[str, Any]] = []
    with BackgroundServer(free_port(), args.latency) as mock:
        server, base = start_server(store, folder)
        dashboard = Dashboard(base, args.poll)
        dashboard.start()
        child_cmd = [
            sys.executable,
            __file__,
            "--child",
            *("--rollouts", str(args.rollouts), "--val", str(args.val)),
            *("--concurrency", str(args.concurrency), "--url", mock.base_url),
            *("--store", str(store), "--workdir", str(folder / "work")),
        ]
        started = time.monotonic()
        child = subprocess.Popen(child_cmd, cwd=folder)
        peak = {"job": 0, "server": 0}
        next_row = 0
        try:
            while True:
                done = child.poll() is not None
                for name, pid in (("job", child.pid), ("server", server.pid)):
                    peak[name] = max(peak[name], rss_kib(pid) or 0)
                stored = count(store, "SELECT count(*) FROM rollouts") if store.exists() else 0
                if stored >= next_row or done:
                    file_b, wal_b = store_bytes(store)
                    row = {
                        "rollouts": stored,
                        "elapsed_s": round(time.monotonic() - started, 1),
                        "job_rss_kib": rss_kib(child.pid),
                        "server_rss_kib": rss_kib(server.pid),
                        "file_bytes": file_b,
                        "wal_bytes": wal_b,
                        "load1": os.getloadavg()[0],
                    }
                    rows.append(row)
                    print(json.dumps(row), flush=True)
                    next_row = (stored // args.every + 1) * args.every
                if done:
                    break
                time.sleep(args.sample)
            if child.returncode != 0:
                raise SystemExit(f"the job's process exited {child.returncode}")
            wall = time.monotonic() - started
            time.sleep(2 * args.poll)  # the dashboard reads the end
            dashboard.stop.set()
            dashboard.join(timeout=120)
            result = finish(args, store, folder, rows, peak, wall, dashboard)
        finally:
            for process in (child, server):
                if process.poll() is None:
                    process.terminate()
                    process.wait(timeout=30)
    return result


def finish(
    args: argparse.Namespace,
    store: Path,
    folder: Path,
    rows: list[dict[str, Any]],
    peak: dict[str, int],
    wall: float,
    dashboard: Dashboard,
) -> dict[str, Any]:
    """The store's figures after the job, then the prune and what it gave back."""
    with sqlite3.connect(store, timeout=60) as conn:  # fold the WAL into the file
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    rollouts = count(store, "SELECT count(*) FROM rollouts")
    figures: dict[str, Any] = {
        "rollouts": rollouts,
        "scored": count(store, "SELECT count(*) FROM rollouts WHERE score IS NOT NULL"),
        "attempts": count(store, "SELECT count(*) FROM attempts"),
        "spans": count(store, "SELECT count(*) FROM spans"),
        "events": count(store, "SELECT count(*) FROM job_events"),
        "evaluations": count(store, "SELECT count(*) FROM evaluations"),
        "file_bytes": store.stat().st_size,
        "cache_bytes": sum(p.stat().st_size for p in (folder / "work").rglob("*") if p.is_file()),
        "wall_s": round(wall, 1),
        "rows": rows,
        "peak_rss_kib": peak,
        "dashboard": {
            "calls": dashboard.calls,
            "errors": dashboard.errors,
            "events_seen": dashboard.events_seen,
            "p50_ms": round(1000 * quantile(dashboard.latencies, 0.5), 1),
            "p99_ms": round(1000 * quantile(dashboard.latencies, 0.99), 1),
        },
    }
    figures["bytes_per_rollout"] = round(figures["file_bytes"] / max(1, rollouts))
    prune = subprocess.run(
        [
            sys.executable,
            "-m",
            "emery",
            "store",
            "prune",
            "--older-than",
            "0",
            "--json",
            "--store",
            str(store),
        ],
        capture_output=True,
        text=True,
        timeout=3600,
        check=True,
    )
    figures["prune"] = json.loads(prune.stdout)
    figures["after_prune"] = {
        "file_bytes": store.stat().st_size,
        "rollouts": count(store, "SELECT count(*) FROM rollouts"),
        "spans": count(store, "SELECT count(*) FROM spans"),
        "evaluations": count(store, "SELECT count(*) FROM evaluations"),
        "events": count(store, "SELECT count(*) FROM job_events"),
    }
    return figures


def growth(rows: list[dict[str, Any]], key: str, every: int) -> str:
    """RSS growth per ``every`` rollouts: from the first row at or past ``every`` (warm)
    to the last, by a straight line through the two."""
    warm = [r for r in rows if r["rollouts"] >= every and r[key]]
    if len(warm) < 2 or warm[-1]["rollouts"] == warm[0]["rollouts"]:
        return "n/a (fewer than two rows after the first interval)"
    first, last = warm[0], warm[-1]
    per = (last[key] - first[key]) / (last["rollouts"] - first["rollouts"]) * every
    return (
        f"{per / 1024:+.1f} MiB per {every} rollouts (from {first[key] / 1024:.0f} MiB at"
        f" {first['rollouts']} to {last[key] / 1024:.0f} MiB at {last['rollouts']})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rollouts", type=int, default=100_000)
    parser.add_argument("--val", type=int, default=1000, help="rollouts per step")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--latency", type=float, default=0.0, help="the mock's seconds")
    parser.add_argument("--every", type=int, default=10_000, help="rollouts between rows")
    parser.add_argument("--poll", type=float, default=2.0, help="the dashboard's period")
    parser.add_argument("--sample", type=float, default=1.0)
    parser.add_argument("--json", type=Path, help="write every figure here")
    parser.add_argument("--keep", type=Path, help="run in this folder and keep it")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--store", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--workdir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.val > 8100:
        parser.error("--val is at most 8100 (distinct A + B questions)")
    if args.child:
        run_child(args)
        return
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        figures = soak(args, args.keep)
    else:
        with tempfile.TemporaryDirectory(prefix="emery-soak-") as folder:
            figures = soak(args, Path(folder))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    rows = figures["rows"]
    n = figures["rollouts"]
    prune = figures["prune"]
    print(f"\n{n} rollouts ({figures['scored']} scored) in {figures['wall_s']} s")
    print(f"job process RSS:   {growth(rows, 'job_rss_kib', args.every)}")
    print(f"server RSS:        {growth(rows, 'server_rss_kib', args.every)}")
    print(
        f"peak RSS (MiB):    job {figures['peak_rss_kib']['job'] / 1024:.0f}, server"
        f" {figures['peak_rss_kib']['server'] / 1024:.0f}"
    )
    print(
        f"store: {figures['file_bytes']} bytes, {figures['bytes_per_rollout']} bytes per"
        f" rollout ({figures['attempts']} attempts, {figures['spans']} spans,"
        f" {figures['evaluations']} evaluations, {figures['events']} events);"
        f" response cache {figures['cache_bytes']} bytes"
    )
    print(f"dashboard: {figures['dashboard']}")
    print(
        f"prune: {prune['rollouts']} rollouts, {prune['spans']} spans, {prune['attempts']}"
        f" attempts deleted; file {prune['bytes_before']} -> {prune['bytes_after']} bytes"
        f" ({prune['bytes_freed']} freed); after: {figures['after_prune']}"
    )


if __name__ == "__main__":
    main()
