"""The server under load while a job runs: ``--clients`` dashboard clients, each on the
job's SSE stream, and OTLP ingest at a stated rate of spans per second.

    nice -n 10 .venv/bin/python benchmarks/reliability/load.py --clients 200 --spans-per-s 200

``emery server --allow-code`` over a SQLite store runs a GEPA job on the word problems
with the scripted models of ``scripted_lm.py`` (``--lm-delay`` seconds a call, so the job
lasts a minute or two) in a job process, as ``POST /api/jobs`` makes it. From the
moment the job is posted, each client does what the dashboard's job page does
(``static/app.js``): loads the page (``GET /api/jobs/ID``, its ``candidates`` and
``events?limit=5000`` at once), follows ``GET /api/jobs/ID/events/stream`` until its
``end`` event, and every ``--refresh`` seconds (a random phase each) reloads the jobs list
(``GET /api/jobs?limit=200``) and the page, as a user moving between pages does. Beside
them one sender posts OTLP/protobuf export requests (``POST /v1/traces``, application
spans of ``--batch`` spans each) at ``--spans-per-s``.

Reported: p50, p99 and the worst latency of each kind of API call and of all of them (the
SSE stream's time to its response headers included), OTLP's answered and stored spans,
and whether every SSE client received every event the job stored, in order, each once,
then ``end`` (checked against the store after the job ends). Exits 1 when an event was
dropped, duplicated or out of order, a call failed, or a span was not stored. The clients
run in this process (aiohttp, one event loop), on the same cores as the server, so their
own time is in the latencies.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
import time
import tomllib
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (  # noqa: E402
    ExportTraceServiceRequest,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue  # noqa: E402
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span  # noqa: E402
from search_jobs import emery_command, emery_env, search_config  # noqa: E402

from emery.proxy.serving import free_port  # noqa: E402

T0 = 1_700_000_000_000_000_000
LIVE = ("created", "queued", "running")
PHASES = (
    ("open", "page opened (all clients at once)"),
    ("reload", "reloads while the job runs"),
    ("end", "page reloaded at the end (all at once)"),
)
KINDS = {
    "jobs": "/api/jobs?limit=200",
    "job": "/api/jobs/ID",
    "candidates": "/api/jobs/ID/candidates",
    "events": "/api/jobs/ID/events?limit=5000",
    "stream": "SSE stream, to its headers",
    "otlp": "POST /v1/traces",
}
TRACE_PREFIX = "10ad"
"""Every trace id the sender makes starts with this, so the store's count can find them."""


@dataclass
class Client:
    """What one dashboard client saw."""

    seqs: list[int] = field(default_factory=list)
    ended: dict[str, Any] | None = None
    errors: list[str] = field(default_factory=list)


@dataclass
class Tally:
    """Latencies by kind of call, and failures."""

    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    failures: list[str] = field(default_factory=list)
    stale: int = 0
    """Calls sent again on a new connection: the server had closed the idle kept-alive
    one as the call went out (a browser sends such a GET again, an OTLP exporter its
    batch: the server stores a span sent twice once)."""

    async def call(
        self, session: aiohttp.ClientSession, kind: str, method: str, path: str, **kw: Any
    ) -> Any:
        began = time.perf_counter()
        for attempt in (1, 2):
            try:
                async with session.request(method, path, **kw) as answer:
                    body = await answer.read()
                    self.latencies[kind].append(time.perf_counter() - began)
                    if answer.status != 200:
                        self.failures.append(f"{method} {path}: {answer.status} {body[:200]!r}")
                        return None
                    if answer.content_type == "application/json":
                        return json.loads(body)
                    return body
            except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as error:
                if attempt == 1 and (method == "GET" or path == "/v1/traces"):
                    self.stale += 1
                    continue
                self.failures.append(f"{method} {path}: {type(error).__name__} {error}")
            except (TimeoutError, aiohttp.ClientError) as error:
                self.failures.append(f"{method} {path}: {type(error).__name__} {error}")
            return None
        return None


def export_request(batch: int, size: int) -> bytes:
    """An OTLP/protobuf export of ``size`` application spans in one new trace."""
    trace = bytes.fromhex(TRACE_PREFIX) + batch.to_bytes(14, "big")
    spans = [
        Span(
            trace_id=trace,
            span_id=(batch * size + i + 1).to_bytes(8, "big"),
            parent_span_id=(batch * size + 1).to_bytes(8, "big") if i else b"",
            name=f"tool-call-{i}",
            kind=Span.SPAN_KIND_CLIENT,
            start_time_unix_nano=T0 + batch * 10**9 + i * 1_000_000,
            end_time_unix_nano=T0 + batch * 10**9 + i * 1_000_000 + 500_000,
            attributes=[
                KeyValue(key="tool.name", value=AnyValue(string_value="search")),
                KeyValue(key="tool.args", value=AnyValue(string_value='{"q": "x"}')),
            ],
        )
        for i in range(size)
    ]
    return ExportTraceServiceRequest(
        resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=spans)])]
    ).SerializeToString()


async def page(session: aiohttp.ClientSession, tally: Tally, job: str, phase: str) -> Any:
    """The job page's three calls at once, as ``jobPage`` makes them; the job. Their
    latencies are kept under ``KIND@PHASE``."""
    base = f"/api/jobs/{job}"
    answers = await asyncio.gather(
        tally.call(session, f"job@{phase}", "GET", base),
        tally.call(session, f"candidates@{phase}", "GET", f"{base}/candidates"),
        tally.call(session, f"events@{phase}", "GET", f"{base}/events", params={"limit": "5000"}),
    )
    return answers[0]


async def follow(session: aiohttp.ClientSession, tally: Tally, job: str, client: Client) -> None:
    """The SSE stream to its ``end`` event: every ``id:`` line's sequence number."""
    began = time.perf_counter()
    try:
        async with session.get(f"/api/jobs/{job}/events/stream") as answer:
            tally.latencies["stream"].append(time.perf_counter() - began)
            if answer.status != 200:
                client.errors.append(f"stream: {answer.status}")
                return
            kind = None
            async for raw in answer.content:
                line = raw.decode().rstrip("\n")
                if line.startswith("id: "):
                    client.seqs.append(int(line[4:]))
                elif line.startswith("event: "):
                    kind = line[7:]
                elif line.startswith("data: ") and kind == "end":
                    client.ended = json.loads(line[6:])
                    return
    except (TimeoutError, aiohttp.ClientError) as error:
        client.errors.append(f"stream: {type(error).__name__} {error}")


async def dashboard(
    base: str, job: str, client: Client, tally: Tally, refresh_s: float, stream_on: bool
) -> None:
    """One user on the job's page: load it, follow the stream, reload now and then;
    without the stream (``stream_on`` false), reload until the job has ended."""
    timeout = aiohttp.ClientTimeout(total=None, sock_read=600)
    async with aiohttp.ClientSession(base_url=base, timeout=timeout) as session:
        await page(session, tally, job, "open")
        if not stream_on:
            await asyncio.sleep(random.uniform(0, refresh_s))
            while True:
                await tally.call(
                    session, "jobs@reload", "GET", "/api/jobs", params={"limit": "200"}
                )
                shown = await page(session, tally, job, "reload")
                if shown is not None and shown["state"] not in LIVE:
                    return
                await asyncio.sleep(refresh_s)
        stream = asyncio.create_task(follow(session, tally, job, client))
        await asyncio.sleep(random.uniform(0, refresh_s))
        while not stream.done():
            await tally.call(session, "jobs@reload", "GET", "/api/jobs", params={"limit": "200"})
            await page(session, tally, job, "reload")
            waited = asyncio.create_task(asyncio.sleep(refresh_s))
            await asyncio.wait({stream, waited}, return_when=asyncio.FIRST_COMPLETED)
            waited.cancel()
        await stream
        await page(session, tally, job, "end")  # the page reloads at the end (route())


async def ingest(
    base: str, tally: Tally, spans_per_s: float, size: int, done: asyncio.Event
) -> tuple[int, int]:
    """OTLP export requests at ``spans_per_s`` until ``done``, each sent at its time
    whether or not the ones before were answered (open loop: a slow server does not
    lower the offered rate): (requests, spans) sent."""
    interval = size / spans_per_s
    headers = {"Content-Type": "application/x-protobuf"}
    sent: list[asyncio.Task[Any]] = []
    started = time.perf_counter()
    async with aiohttp.ClientSession(base_url=base) as session:
        while not done.is_set():
            body = export_request(len(sent), size)
            call = tally.call(session, "otlp", "POST", "/v1/traces", data=body, headers=headers)
            sent.append(asyncio.create_task(call))
            delay = started + len(sent) * interval - time.perf_counter()
            if delay > 0:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(done.wait(), delay)
        await asyncio.gather(*sent)
    return len(sent), len(sent) * size


def post_job(base: str, folder: Path, metric_calls: int) -> str:
    """The GEPA job, posted to the server; its id."""
    config = tomllib.loads(search_config("gepa", folder / "work", metric_calls=metric_calls))
    answer = httpx.post(f"{base}/api/jobs", json={"config": config}, timeout=120)
    answer.raise_for_status()
    return str(answer.json()["id"])


async def drive(args: argparse.Namespace, base: str, folder: Path) -> dict[str, Any]:
    tally = Tally()
    clients = [Client() for _ in range(args.clients)]
    done = asyncio.Event()
    job = post_job(base, folder, args.metric_calls)
    started = time.perf_counter()
    sender = asyncio.create_task(ingest(base, tally, args.spans_per_s, args.batch, done))
    users = [
        asyncio.create_task(dashboard(base, job, c, tally, args.refresh, not args.no_stream))
        for c in clients
    ]
    await asyncio.gather(*users)
    wall = time.perf_counter() - started
    done.set()
    requests, spans = await sender
    return {
        "job": job,
        "wall_s": wall,
        "tally": tally,
        "clients": clients,
        "otlp_requests": requests,
        "otlp_spans": spans,
    }


def quantiles(values: list[float]) -> str:
    ordered = sorted(values)

    def q(p: float) -> float:
        return 1000 * ordered[min(len(ordered) - 1, int(p * len(ordered)))]

    return f"{len(ordered):>6} {q(0.5):>9.1f} {q(0.99):>9.1f} {1000 * ordered[-1]:>9.1f}"


def check(store: Path, run: dict[str, Any], streams: bool) -> tuple[list[str], dict[str, Any]]:
    """Problems found against the store, and the stored figures."""
    problems: list[str] = []
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=60) as conn:
        stored = [
            int(r[0])
            for r in conn.execute(
                "SELECT seq FROM job_events WHERE job_id = ? ORDER BY seq", (run["job"],)
            )
        ]
        state = conn.execute("SELECT state FROM jobs WHERE id = ?", (run["job"],)).fetchone()[0]
        spans = conn.execute(
            "SELECT count(*) FROM spans WHERE trace_id LIKE ?", (f"{TRACE_PREFIX}%",)
        ).fetchone()[0]
    whole = 0
    for index, client in enumerate(run["clients"] if streams else []):
        if client.errors:
            problems.append(f"client {index}: {client.errors[:3]}")
        elif client.seqs != stored:
            missing = sorted(set(stored) - set(client.seqs))
            extra = len(client.seqs) - len(set(client.seqs))
            problems.append(
                f"client {index}: {len(client.seqs)} events of {len(stored)}, missing"
                f" {missing[:5]}, {extra} repeated, in order: {client.seqs == sorted(client.seqs)}"
            )
        elif client.ended is None or client.ended.get("last_seq") != stored[-1]:
            problems.append(f"client {index}: end {client.ended} after seq {stored[-1]}")
        else:
            whole += 1
    if spans != run["otlp_spans"]:
        problems.append(f"OTLP: {run['otlp_spans']} spans sent, {spans} stored")
    problems += [f"call failed: {f}" for f in run["tally"].failures[:10]]
    if state != "succeeded":
        problems.append(f"the job ended {state}")
    return problems, {"events": len(stored), "whole_clients": whole, "spans_stored": spans}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--spans-per-s", type=float, default=200.0)
    parser.add_argument("--batch", type=int, default=20, help="spans per OTLP request")
    parser.add_argument("--refresh", type=float, default=30.0, help="seconds between reloads")
    parser.add_argument(
        "--no-stream", action="store_true", help="clients reload only (a control run)"
    )
    parser.add_argument("--metric-calls", type=int, default=200)
    parser.add_argument("--lm-delay", type=float, default=0.1)
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="emery-load-") as name:
        folder = Path(name)
        store = folder / "emery.db"
        port = free_port()
        command = ["server", "--port", str(port), "--store", str(store), "--allow-code"]
        server = subprocess.Popen(
            emery_command(*command),
            cwd=folder,
            env=emery_env(delay_s=args.lm_delay),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 120
            while True:
                try:
                    httpx.get(f"{base}/health", timeout=5).raise_for_status()
                    break
                except httpx.HTTPError:
                    if time.monotonic() > deadline or server.poll() is not None:
                        raise SystemExit("emery server did not start") from None
                    time.sleep(0.3)
            load_before = os.getloadavg()
            run = asyncio.run(drive(args, base, folder))
            load_after = os.getloadavg()
            problems, stored = check(store, run, not args.no_stream)
        finally:
            server.terminate()
            server.wait(timeout=30)
    tally: Tally = run["tally"]
    print(
        f"{args.clients} dashboard clients, OTLP {args.spans_per_s:g} spans/s in requests of"
        f" {args.batch}; {'no SSE, ' if args.no_stream else ''}page reloads every"
        f" {args.refresh:g} s ({4 * args.clients / args.refresh:.1f} calls/s offered);"
        f" job {run['job']} ran {run['wall_s']:.1f} s ({stored['events']} events);"
        f" load {load_before[0]:.1f} before, {load_after[0]:.1f} after (1-min)"
    )
    print(f"{'calls':<40} {'n':>6} {'p50 ms':>9} {'p99 ms':>9} {'max ms':>9}")
    every: list[float] = []
    for name, label in PHASES:
        values = [x for k, v in tally.latencies.items() if k.endswith(f"@{name}") for x in v]
        every += values
        if values:
            print(f"{label:<40} {quantiles(values)}")
    for kind in ("jobs", "job", "candidates", "events"):
        values = [x for k, v in tally.latencies.items() if k.startswith(f"{kind}@") for x in v]
        if values:
            print(f"  {'GET ' + KINDS[kind]:<38} {quantiles(values)}")
    for kind in ("stream", "otlp"):
        values = tally.latencies.get(kind, [])
        every += values
        if values:
            print(f"{KINDS[kind]:<40} {quantiles(values)}")
    print(f"{'all API calls':<40} {quantiles(every)}")
    rate = run["otlp_spans"] / run["wall_s"]
    print(
        f"OTLP: {run['otlp_requests']} requests, {run['otlp_spans']} spans sent"
        f" ({rate:.0f} spans/s achieved), {stored['spans_stored']} stored"
    )
    if not args.no_stream:
        print(
            f"SSE: {stored['whole_clients']} of {args.clients} clients received all"
            f" {stored['events']} events in order, each once, then end"
        )
    print(f"GETs sent again on a fresh connection (the server closed the idle one): {tally.stale}")
    if args.json:
        figures = {
            "args": vars(args) | {"json": str(args.json)},
            "wall_s": run["wall_s"],
            "load": [load_before, load_after],
            "latency_ms": {k: sorted(1000 * x for x in v) for k, v in tally.latencies.items()},
            "problems": problems,
            **stored,
            "otlp_spans_sent": run["otlp_spans"],
        }
        args.json.write_text(json.dumps(figures))
    for problem in problems:
        print(f"problem: {problem}")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
