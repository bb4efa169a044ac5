"""What serving the store over HTTP costs: ``emery server`` (its own process, uvicorn,
one keep-alive client) against the same reads and writes called in this process on the
store API (the peer), side by side in one run, per store backend.

    .venv/bin/python benchmarks/server/overhead.py [--jobs 1000] [--requests 200]
        [--postgres URL]   # default $EMERY_TEST_POSTGRES_URL; SQLite always runs

The store holds one finished GEPA job (scripted models: candidates, evaluations, rollouts,
events) and filler jobs up to ``--jobs``. Measured, each side in rounds that alternate
(the median round is reported):

- the jobs list (``GET /api/jobs?limit=50``) against ``store.list_jobs`` and the same job
  views built in process: requests/s, p50 and p99 latency;
- the candidate list of the job (``GET /api/jobs/J/candidates``) against the same views;
- OTLP ingest (``POST /v1/traces``, protobuf, 100 spans per request) against
  ``store.add_spans`` of the same spans: spans/s;
- SSE: 50 concurrent followers of the finished job's stream against 50 reads of its
  events in process: events delivered per second.

The overhead ratio is the peer's rate over the server's.
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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "reliability"))

import httpx  # noqa: E402
from scripted_lm import reflection_lm, task_lm  # noqa: E402
from spans import SpanBatches  # noqa: E402

import emery  # noqa: E402
from emery.proxy.serving import free_port  # noqa: E402
from emery.server.views import candidate_views, job_view, seed_id  # noqa: E402
from emery.store import PostgresStore, SQLiteStore  # noqa: E402
from emery.store.protocol import Store  # noqa: E402
from emery.store.records import NewJob  # noqa: E402
from emery.store.schema import metadata  # noqa: E402

ROUNDS = 3
FOLLOWERS = 50


@dataclass
class Row:
    """One measured pair: the server and its in-process peer."""

    what: str
    unit: str
    server: float
    peer: float
    notes: str = ""

    def line(self) -> str:
        ratio = self.peer / self.server if self.server else float("inf")
        return (
            f"{self.what:<28} {self.server:>10.1f} {self.peer:>10.1f} {self.unit:<11}"
            f" {ratio:>6.2f}x  {self.notes}"
        )


def populate(store: Store, jobs: int, workdir: Path) -> str:
    """A finished GEPA job and filler jobs up to ``jobs``; the GEPA job's id."""
    result = emery.optimize(
        None,
        "word_problems",
        algorithm="gepa",
        budget=300,
        lm=task_lm(),
        reflection_lm=reflection_lm(),
        store=store,
        runtime={"workdir": str(workdir), "concurrency": 4},
        name="measured",
        progress=False,
    )
    for index in range(jobs - 1):
        store.create_job(
            NewJob(id=f"j-filler{index:05d}", name=f"filler-{index}", algorithm="gepa", config={})
        )
    return result.job_id


def start_server(store_url: str, folder: Path) -> tuple[subprocess.Popen[bytes], str]:
    """``emery server`` over ``store_url`` in its own process; its base URL."""
    port = free_port()
    command = [sys.executable, "-m", "emery", "server", "--port", str(port)]
    process = subprocess.Popen(
        [*command, "--store", store_url], cwd=folder, stdout=subprocess.DEVNULL
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            httpx.get(f"{base}/health", timeout=2).raise_for_status()
            return process, base
        except httpx.HTTPError:
            time.sleep(0.2)
    process.kill()
    raise SystemExit(f"emery server on {base} did not start")


def timed(call: Callable[[], object], n: int) -> tuple[float, list[float]]:
    """(calls per second, each call's seconds) of ``n`` calls back to back."""
    latencies = []
    start = time.perf_counter()
    for _ in range(n):
        began = time.perf_counter()
        call()
        latencies.append(time.perf_counter() - began)
    return n / (time.perf_counter() - start), latencies


def p(latencies: list[float], q: float) -> float:
    """The ``q`` quantile in milliseconds."""
    ordered = sorted(latencies)
    return 1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def compare(
    what: str, server: Callable[[], object], peer: Callable[[], object], n: int, per_call: int = 1
) -> Row:
    """Alternating rounds of both sides; the median round's rates and latencies."""
    server(), peer()  # warm up: connections, caches, imports
    rounds = [(timed(server, n), timed(peer, n)) for _ in range(ROUNDS)]
    server_rate, server_lat = sorted(rounds, key=lambda r: r[0][0])[ROUNDS // 2][0]
    peer_rate, peer_lat = sorted(rounds, key=lambda r: r[1][0])[ROUNDS // 2][1]
    notes = (
        f"p50 {p(server_lat, 0.5):.1f} / {p(peer_lat, 0.5):.1f} ms,"
        f" p99 {p(server_lat, 0.99):.1f} / {p(peer_lat, 0.99):.1f} ms"
    )
    unit = "req/s" if per_call == 1 else "spans/s"
    return Row(what, unit, server_rate * per_call, peer_rate * per_call, notes)


def jobs_rows(client: httpx.Client, store: Store, job_id: str, n: int) -> list[Row]:
    """The jobs list and the candidate list, over HTTP and in process."""

    def jobs_http() -> object:
        return client.get("/api/jobs", params={"limit": 50}).raise_for_status().json()

    def jobs_peer() -> object:
        page = store.list_jobs(limit=50)
        return [job_view(store, job) for job in page.items]

    def candidates_http() -> object:
        return client.get(f"/api/jobs/{job_id}/candidates").raise_for_status().json()

    def candidates_peer() -> object:
        return seed_id(store, job_id), candidate_views(store, job_id)

    count = len(candidates_peer()[1])
    return [
        compare(f"jobs list (of {store.list_jobs(limit=1).total})", jobs_http, jobs_peer, n),
        compare(f"candidate list ({count})", candidates_http, candidates_peer, n),
    ]


def ingest_row(client: httpx.Client, store: Store, batches: SpanBatches, n: int) -> Row:
    """OTLP protobuf over HTTP against ``store.add_spans`` of the same spans."""
    headers = {"Content-Type": "application/x-protobuf"}
    batches.prepare(1 + ROUNDS * n)

    def http() -> object:
        body = batches.protobuf()
        answer = client.post("/v1/traces", content=body, headers=headers).raise_for_status()
        return answer.content

    def peer() -> None:
        store.add_spans(batches.records())

    return compare("OTLP ingest (100/request)", http, peer, n, per_call=batches.size)


async def _follow(client: httpx.AsyncClient, path: str) -> int:
    events = 0
    async with client.stream("GET", path) as response:
        async for line in response.aiter_lines():
            events += line.startswith("id: ")
    return events


def sse_row(base: str, store: Store, job_id: str) -> Row:
    """``FOLLOWERS`` SSE streams of the finished job at once against as many reads."""

    async def http() -> int:
        limits = httpx.Limits(max_connections=FOLLOWERS)
        async with httpx.AsyncClient(base_url=base, timeout=60, limits=limits) as client:
            path = f"/api/jobs/{job_id}/events/stream"
            counts = await asyncio.gather(*(_follow(client, path) for _ in range(FOLLOWERS)))
        return sum(counts)

    def rate(run: Callable[[], int]) -> float:
        start = time.perf_counter()
        delivered = run()
        return delivered / (time.perf_counter() - start)

    def peer() -> int:
        return sum(len(store.list_events(job_id, limit=500)) for _ in range(FOLLOWERS))

    server_rates = [rate(lambda: asyncio.run(http())) for _ in range(ROUNDS)]
    peer_rates = [rate(peer) for _ in range(ROUNDS)]
    events = len(store.list_events(job_id))
    return Row(
        f"SSE, {FOLLOWERS} followers",
        "events/s",
        statistics.median(server_rates),
        statistics.median(peer_rates),
        f"{events} events each",
    )


def measure(
    label: str, store: Store, url: str, args: argparse.Namespace, folder: Path
) -> list[Row]:
    """Every row for one store backend (``url``: the store's location for the server)."""
    folder.mkdir(parents=True, exist_ok=True)
    job_id = populate(store, args.jobs, folder)
    batches = SpanBatches(store, job_id, size=100)
    process, base = start_server(url, folder)
    try:
        with httpx.Client(base_url=base, timeout=60) as client:
            rows = jobs_rows(client, store, job_id, args.requests)
            rows.append(ingest_row(client, store, batches, max(args.requests // 4, 10)))
        rows.append(sse_row(base, store, job_id))
    finally:
        process.terminate()
        process.wait(timeout=30)
    print(f"\n{label}: {args.jobs} jobs, {args.requests} requests per round, {ROUNDS} rounds")
    print(f"{'':<28} {'server':>10} {'in-process':>10} {'':<11} {'ratio':>7}")
    for row in rows:
        print(row.line())
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--postgres", default=os.environ.get("EMERY_TEST_POSTGRES_URL"))
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="emery-server-bench-"))
    sqlite = SQLiteStore(scratch / "emery.db")
    try:
        measure("SQLite file", sqlite, str(scratch / "emery.db"), args, scratch / "sqlite")
    finally:
        sqlite.close()
    if args.postgres:
        store = PostgresStore(args.postgres)
        metadata.drop_all(store.engine)
        store.close()
        store = PostgresStore(args.postgres)
        try:
            measure("PostgreSQL", store, args.postgres, args, scratch / "pg")
        finally:
            metadata.drop_all(store.engine)
            store.close()


if __name__ == "__main__":
    main()
