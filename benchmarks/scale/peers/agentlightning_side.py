"""agent-lightning's side of the scale benchmark (run in its own venv, Python 3.12).

Usage: python agentlightning_side.py --mode inproc|http --runners 8,32,128 --rollouts 600
                                     --ops 600 --out result.json

agent-lightning 1.0.2's store is its server's in-memory state (``agentlightning.server.
store``: dicts mutated by the route handlers on the event loop, no locks) behind FastAPI:

- ``inproc``: the route handlers called directly on one event loop thread (the store as
  the server runs it, without HTTP); runner threads hand their calls to that loop;
- ``http``: the server as shipped (uvicorn, one worker) in its own process on 127.0.0.1,
  each runner thread with its own keep-alive ``httpx.Client``.

Its API has no claim with a lease: a runner lists queued rollouts
(``GET /api/rollouts?state_in=queuing``, ``limit=32``) and moves one to ``running`` with
``PATCH`` (409 when another runner got there first: it tries the next, in random order).
The attempt update is a ``PATCH`` of ``last_attempt_id``; spans are events, one
``POST .../attempt/{id}/events`` each (no batch call); finishing is a ``PATCH`` to
``succeeded``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from agentlightning.schemas import (
    EventCreate,
    RolloutCreate,
    RolloutPatch,
    RolloutState,
    RolloutStatusPatch,
)
from agentlightning.server import store as agl_store
from agentlightning.server.routes import events, rollouts
from workload import op_rates, run_runners

WINDOW = 32


def span_data(i: int) -> dict[str, Any]:
    return {"name": "emery.lm" if i else "emery.rollout", "gen_ai.usage.input_tokens": 12}


class InProcSide:
    """The route handlers on one event loop thread, as the server runs them."""

    def __init__(self) -> None:
        for table in (agl_store._rollouts, agl_store._events):
            table.clear()
        agl_store._terminal_order.clear()
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        self.count = 0

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def enqueue(self, n: int) -> None:
        body = [RolloutCreate(input={"question": f"q{self.count + i}"}) for i in range(n)]
        self.count += n
        self._call(rollouts.enqueue_rollouts(body))

    def claim(self, worker: str) -> tuple[str, str] | None:
        queued = self._call(rollouts.list_rollouts([RolloutState.QUEUING], WINDOW))
        random.shuffle(queued)
        for rollout in queued:
            attempt = f"{worker}-{uuid.uuid4().hex[:6]}"
            patch = RolloutPatch(
                status=RolloutStatusPatch(state=RolloutState.RUNNING, last_attempt_id=attempt)
            )
            try:
                self._call(rollouts.patch_rollout(rollout.rollout_id, patch))
            except Exception:  # 409: another runner took it
                continue
            return rollout.rollout_id, attempt
        return None

    def update(self, handle: tuple[str, str]) -> None:
        patch = RolloutPatch(status=RolloutStatusPatch(last_attempt_id=handle[1]))
        self._call(rollouts.patch_rollout(handle[0], patch))

    def add_spans(self, handle: tuple[str, str], n: int) -> None:
        for i in range(n):
            body = EventCreate(event_type="span", data=span_data(i))
            self._call(events.post_event(handle[0], body, handle[1]))

    def finish(self, handle: tuple[str, str]) -> None:
        patch = RolloutPatch(status=RolloutStatusPatch(state=RolloutState.SUCCEEDED))
        self._call(rollouts.patch_rollout(handle[0], patch))


class HttpSide:
    """The shipped server over HTTP; one keep-alive client per runner thread."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.local = threading.local()
        self.count = 0

    def _client(self) -> httpx.Client:
        client = getattr(self.local, "client", None)
        if client is None:
            client = self.local.client = httpx.Client(base_url=self.base, timeout=120)
        return client

    def enqueue(self, n: int) -> None:
        body = [{"input": {"question": f"q{self.count + i}"}} for i in range(n)]
        self.count += n
        self._client().post("/api/rollouts", json=body).raise_for_status()

    def claim(self, worker: str) -> tuple[str, str] | None:
        client = self._client()
        params = {"state_in": "queuing", "limit": WINDOW}
        queued = client.get("/api/rollouts", params=params).raise_for_status().json()
        random.shuffle(queued)
        for rollout in queued:
            attempt = f"{worker}-{uuid.uuid4().hex[:6]}"
            body = {"status": {"state": "running", "last_attempt_id": attempt}}
            response = client.patch(f"/api/rollouts/{rollout['rollout_id']}", json=body)
            if response.status_code == 409:
                continue
            response.raise_for_status()
            return rollout["rollout_id"], attempt
        return None

    def update(self, handle: tuple[str, str]) -> None:
        body = {"status": {"last_attempt_id": handle[1]}}
        self._client().patch(f"/api/rollouts/{handle[0]}", json=body).raise_for_status()

    def add_spans(self, handle: tuple[str, str], n: int) -> None:
        client = self._client()
        for i in range(n):
            url = f"/api/rollouts/{handle[0]}/attempt/{handle[1]}/events"
            client.post(url, json={"event_type": "span", "data": span_data(i)}).raise_for_status()

    def finish(self, handle: tuple[str, str]) -> None:
        body = {"status": {"state": "succeeded"}}
        self._client().patch(f"/api/rollouts/{handle[0]}", json=body).raise_for_status()


SERVER = """
import sys, uvicorn
from omegaconf import OmegaConf
from agentlightning.server.app import create_app
import agentlightning, pathlib
config = OmegaConf.load(pathlib.Path(agentlightning.__file__).parent / "config" / "server.yaml")
uvicorn.run(create_app(config), host="127.0.0.1", port=int(sys.argv[1]), workers=1,
            timeout_keep_alive=120, log_level="warning")
"""


def start_server() -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(port)])
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                return server, base
        except httpx.HTTPError:
            time.sleep(0.2)
    server.kill()
    raise RuntimeError("the agent-lightning server did not start")


def measure(args: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {"runners": {}}
    server = None
    try:
        if args.mode == "http":
            server, base = start_server()

        def fresh() -> Any:
            return InProcSide() if server is None else HttpSide(base)

        if args.ops:
            result["ops"] = op_rates(fresh(), args.ops)
        for n in (int(x) for x in args.runners.split(",") if x):
            if server is not None:  # a fresh server: an empty store
                server.terminate()
                server.wait(timeout=30)
                server, base = start_server()
            result["runners"][str(n)] = run_runners(fresh(), n, args.rollouts, args.agent_s)
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=["inproc", "http"], required=True)
    parser.add_argument("--runners", default="8,32,128")
    parser.add_argument("--rollouts", type=int, default=600)
    parser.add_argument("--ops", type=int, default=600)
    parser.add_argument("--agent-s", type=float, default=0.0)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.write_text(json.dumps(measure(args), indent=1))


if __name__ == "__main__":
    main()
