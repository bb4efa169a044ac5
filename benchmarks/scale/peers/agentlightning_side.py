"""agent-lightning's side of the scale benchmark (run in its own venv: agentlightning 0.3.0).

Usage: python agentlightning_side.py --mode memory|server --runners 8,32,128 --rollouts 600
                                     --ops 600 [--agent-s 1.0] --out result.json

agent-lightning 0.3.0's ``LightningStore`` is a queue its runners pull from, driven here
through the calls its runner (``agentlightning.runner.agent``) makes:
``enqueue_many_rollouts`` (rollouts queued), ``dequeue_rollout(worker_id=...)`` (the next
rollout, its attempt created, ``preparing``), ``update_attempt(last_heartbeat_time=...)``
(the attempt's heartbeat), ``add_many_spans`` (the attempt's spans, numbered by the
caller) and ``update_attempt(status="succeeded")`` (the rollout finishes with it).

- ``memory``: ``InMemoryLightningStore`` in this process behind ``LightningStoreThreaded``,
  as its shared-memory execution strategy runs runner threads; each runner thread calls
  it on its own event loop (that strategy's ``asyncio.run`` per thread);
- ``server``: ``agl store`` (``agentlightning.cli.store``: ``LightningStoreServer`` over an
  ``InMemoryLightningStore(thread_safe=True)``, uvicorn, one worker) in its own process on
  127.0.0.1; each runner thread with its own ``LightningStoreClient`` (aiohttp) on its own
  event loop. The client's ``add_many_spans`` is one ``POST /spans`` per span.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from agentlightning.store import (
    InMemoryLightningStore,
    LightningStore,
    LightningStoreClient,
    LightningStoreThreaded,
)
from agentlightning.types import EnqueueRolloutRequest, Span
from workload import op_rates, run_runners

logging.disable(logging.WARNING)  # the client logs every empty dequeue at the end


class AglSide:
    """A ``LightningStore`` per runner thread (``store()``), each thread on its own loop."""

    def __init__(self, store: Callable[[], LightningStore]) -> None:
        self.make_store = store
        self.local = threading.local()
        self.opened: list[tuple[asyncio.AbstractEventLoop, LightningStore]] = []
        self.count = 0

    def _call(self, fn: Callable[[LightningStore], Coroutine[Any, Any, Any]]) -> Any:
        if getattr(self.local, "loop", None) is None:
            self.local.loop = asyncio.new_event_loop()
            self.local.store = self.make_store()
            self.opened.append((self.local.loop, self.local.store))
        return self.local.loop.run_until_complete(fn(self.local.store))

    def enqueue(self, n: int) -> None:
        rollouts = [
            EnqueueRolloutRequest(input={"question": f"q{self.count + i}"}, mode="val")
            for i in range(n)
        ]
        self.count += n
        self._call(lambda store: store.enqueue_many_rollouts(rollouts))

    def claim(self, worker: str) -> tuple[str, str] | None:
        got = self._call(lambda store: store.dequeue_rollout(worker_id=worker))
        return None if got is None else (got.rollout_id, got.attempt.attempt_id)

    def update(self, handle: tuple[str, str]) -> None:
        now = time.time()
        self._call(lambda store: store.update_attempt(*handle, last_heartbeat_time=now))

    def add_spans(self, handle: tuple[str, str], n: int) -> None:
        spans = [
            Span.from_attributes(
                attributes={"gen_ai.usage.input_tokens": 12, "i": i},
                rollout_id=handle[0],
                attempt_id=handle[1],
                sequence_id=i + 1,  # numbered by the caller, as emery's side does
                name="emery.lm" if i else "emery.rollout",
                start_time=time.time(),
                end_time=time.time(),
            )
            for i in range(n)
        ]
        self._call(lambda store: store.add_many_spans(spans))

    def finish(self, handle: tuple[str, str]) -> None:
        self._call(lambda store: store.update_attempt(*handle, status="succeeded"))

    def close(self) -> None:
        for loop, store in self.opened:
            if isinstance(store, LightningStoreClient):
                loop.run_until_complete(store.close())
            loop.close()


def start_server() -> tuple[subprocess.Popen[bytes], str]:
    """``agl store`` on a free port of 127.0.0.1, once its health check answers."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    command = [sys.executable, "-m", "agentlightning.cli.store", "--host", "127.0.0.1"]
    server = subprocess.Popen([*command, "--port", str(port), "--log-level", "WARNING"])
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{base}/v1/agl/health", timeout=2) as response:
                if response.status == 200:
                    return server, base
        except OSError:
            time.sleep(0.2)
    server.kill()
    raise RuntimeError("the agent-lightning store server did not start")


def measure(args: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {"runners": {}}
    server = None

    def fresh() -> AglSide:
        """A side on an empty store: a new in-memory store, or a new server's clients."""
        nonlocal server
        if args.mode == "memory":
            shared = LightningStoreThreaded(InMemoryLightningStore())
            return AglSide(lambda: shared)
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
        server, base = start_server()
        # request_timeout: a dequeue that times out returns None and loses its rollout
        return AglSide(lambda: LightningStoreClient(base, request_timeout=600))

    try:
        if args.ops:
            side = fresh()
            result["ops"] = op_rates(side, args.ops)
            side.close()
        for n in (int(x) for x in args.runners.split(",") if x):
            side = fresh()
            result["runners"][str(n)] = run_runners(side, n, args.rollouts, args.agent_s)
            side.close()
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=["memory", "server"], required=True)
    parser.add_argument("--runners", default="8,32,128")
    parser.add_argument("--rollouts", type=int, default=600)
    parser.add_argument("--ops", type=int, default=600)
    parser.add_argument("--agent-s", type=float, default=0.0)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.write_text(json.dumps(measure(args), indent=1))


if __name__ == "__main__":
    main()
