"""emery's own CPU per rollout, and the HTTP client's per call (README: "emery's own work
per rollout").

``rollouts``: the efficiency task's program scored on val under distinct candidates (no
stored result reused) with a scripted task model that answers at once, so the CPU is
emery's own: the batch loop, rollout and attempt states, spans, the prompt program, the
verifier and the result; ``--store`` adds a SQLite store behind the trace recorder.
``http``: the mock endpoint at zero latency, 8 calls at once, through
``OpenAICompatibleLM`` (the ``openai`` SDK) and through a bare aiohttp session posting the
same JSON. ``mock``: the mock endpoint's own CPU per request (its process, from
``/proc``), which shares the machine's cores with the client it serves.

    .venv/bin/python benchmarks/efficiency/per_rollout.py rollouts --candidates 60
    .venv/bin/python benchmarks/efficiency/per_rollout.py rollouts --store
    .venv/bin/python benchmarks/efficiency/per_rollout.py http --calls 400
    .venv/bin/python benchmarks/efficiency/per_rollout.py mock --calls 2000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mock_endpoint import BackgroundServer, sums
from run import free_port, program

from emery.algorithms.context import build_search_context
from emery.core.models import Candidate
from emery.lm.fake import FakeLM
from emery.lm.openai_compat import OpenAICompatibleLM
from emery.tracing.recorder import RolloutRecorder
from emery.verifiers.config import VerifierConfig, build_verifier


async def rollouts(candidates: int, store: bool) -> None:
    recorder: RolloutRecorder | None = None
    if store:
        from emery.store.backends import open_store
        from emery.tracing.store_recorder import StoreRecorder

        recorder = StoreRecorder(open_store(Path(tempfile.mkdtemp()) / "emery.db"))
    dataset = sums()
    ctx = build_search_context(
        system=program(),
        dataset=dataset,
        verifier=build_verifier(VerifierConfig(kind="numeric")),
        lms={"task": FakeLM(lambda messages: "The sum is 7. Answer: 7")},
        recorder=recorder,
    )
    chosen = [
        Candidate(components={"solve": f"Answer the question. ({i})"})
        for i in range(candidates + 1)
    ]
    await ctx.evaluations.evaluate(chosen[0], dataset.val, "val", charge=False)  # warm up
    count, started = 0, time.process_time()
    for candidate in chosen[1:]:
        result = await ctx.evaluations.evaluate(candidate, dataset.val, "val", charge=False)
        count += len(result.results)
    if recorder is not None:
        ctx.evaluations.evaluator.tracing.flush()
    cpu = time.process_time() - started
    print(f"{count} rollouts: {1000 * cpu / count:.3f} ms CPU a rollout")


def messages(i: int) -> list[Any]:
    return [
        {"role": "system", "content": "Answer the question."},
        {"role": "user", "content": f"What is {i} + 3?"},
    ]


def process_cpu_s(pid: int) -> float:
    """User and system CPU seconds of process ``pid`` so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def mock_cpu(base_url: str, pid: int, calls: int) -> None:
    """The mock endpoint's own CPU per request (its process, read from ``/proc``), on
    calls posted 8 at a time by a bare aiohttp session."""
    import aiohttp

    async with aiohttp.ClientSession(headers={"Content-Type": "application/json"}) as session:

        async def call(i: int) -> None:
            body = json.dumps({"model": "mock-task", "messages": messages(i), "max_tokens": 256})
            async with session.post(f"{base_url}/chat/completions", data=body) as reply:
                await reply.read()

        for i in range(40):  # warm up
            await call(i)
        started = process_cpu_s(pid)
        for first in range(0, calls, 8):
            await asyncio.gather(*(call(first + j) for j in range(8)))
        cpu = process_cpu_s(pid) - started
    print(f"the mock: {1000 * cpu / calls:.3f} ms CPU a request")


async def http(base_url: str, calls: int) -> None:
    import aiohttp

    lm = OpenAICompatibleLM("mock-task", base_url=base_url, concurrency=64)
    session = aiohttp.ClientSession(headers={"Content-Type": "application/json"})

    async def sdk(i: int) -> None:
        await lm.complete(messages(i), max_tokens=256)

    async def bare(i: int) -> None:
        body = json.dumps({"model": "mock-task", "messages": messages(i), "max_tokens": 256})
        async with session.post(f"{base_url}/chat/completions", data=body) as reply:
            json.loads(await reply.read())

    try:
        for name, call in (("openai SDK", sdk), ("bare aiohttp", bare)):
            for i in range(20):
                await call(i)
            started = time.process_time()
            for first in range(0, calls, 8):
                await asyncio.gather(*(call(first + j) for j in range(8)))
            cpu = time.process_time() - started
            print(f"{name}: {1000 * cpu / calls:.3f} ms CPU a call")
    finally:
        await session.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["rollouts", "http", "mock"])
    parser.add_argument("--candidates", type=int, default=60, help="rollouts: 30 each")
    parser.add_argument("--store", action="store_true", help="rollouts: a SQLite store")
    parser.add_argument("--calls", type=int, default=400, help="http, mock: calls per client")
    args = parser.parse_args()
    if args.what == "rollouts":
        asyncio.run(rollouts(args.candidates, args.store))
        return
    with BackgroundServer(free_port(), 0.0) as server:
        if args.what == "mock":
            assert server.process is not None
            asyncio.run(mock_cpu(server.base_url, server.process.pid, args.calls))
            return
        asyncio.run(http(server.base_url, args.calls))


if __name__ == "__main__":
    main()
