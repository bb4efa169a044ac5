"""Scored rollouts per second against the limit ``concurrency / latency``, emery beside peers.

Usage: python benchmarks/throughput/run.py [--latency 0.1] [--concurrency 1,8,64,256]
                                           [--per-slot 30] [--peers gepa,dspy]

A mock OpenAI-compatible endpoint (``mock_openai.py``, its own process) answers every call
after a fixed latency, so a framework that adds no overhead scores ``concurrency / latency``
rollouts per second. Each measurement runs in a fresh process over
``max(30, concurrency * per_slot)`` examples (``per_slot`` rounds of calls, so start-up
costs such as opening connections weigh little):

- emery: a real eval job (SQLite store, response cache, rollouts with spans, results
  committed) through ``emery.optimize`` (``emery_side.py``);
- gepa 0.1.4: its default adapter's ``evaluate`` with ``max_litellm_workers`` (litellm);
- DSPy 3.4.1: ``dspy.Evaluate`` with ``num_threads``;

the peers installed into virtual environments under ``.bench-venvs/``. Prints a markdown
table: rollouts/s, the ratio to the limit, and the framework's CPU time per rollout (the
whole process, all threads). The machine's load average is printed too: on a busy
machine every side gets less CPU, a single-threaded event loop more so than a pool of
64 or 256 threads.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "quality"))

from common import ensure_venv  # noqa: E402

# (venv name, requirements, script); gepa's default adapter needs litellm (its "full" extra
# asks for <1.92), which the quality benchmark's plain gepa venv does not have.
PEERS = {
    "gepa": ("gepa-litellm", ["gepa==0.1.4", "litellm==1.91.5"], HERE / "peers" / "gepa_side.py"),
    "dspy": ("dspy", ["dspy==3.4.1", "optuna==5.0.0"], HERE / "peers" / "dspy_side.py"),
}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def measure(
    python: Path, script: Path, url: str, concurrency: int, rollouts: int
) -> dict[str, float]:
    completed = subprocess.run(
        [
            str(python),
            str(script),
            "--url",
            url,
            "--concurrency",
            str(concurrency),
            "--rollouts",
            str(rollouts),
        ],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"{script.name} failed:\n{completed.stderr[-2000:]}")
    result: dict[str, float] = json.loads(completed.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--concurrency", default="1,8,64,256")
    parser.add_argument("--per-slot", type=int, default=30)
    parser.add_argument("--peers", default="gepa,dspy")
    args = parser.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]
    peers = [p for p in args.peers.split(",") if p]
    pythons = {name: ensure_venv(PEERS[name][0], PEERS[name][1]) for name in peers}
    load_before = os.getloadavg()
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            str(HERE / "mock_openai.py"),
            "--port",
            str(port),
            "--latency",
            str(args.latency),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        server.stdout.readline()  # ready
        url = f"http://127.0.0.1:{port}/v1"
        rows = []
        for concurrency in levels:
            limit = concurrency / args.latency
            rollouts = max(30, concurrency * args.per_slot)
            sides = {
                "emery": measure(
                    Path(sys.executable), HERE / "emery_side.py", url, concurrency, rollouts
                )
            }
            for name in peers:
                sides[name] = measure(pythons[name], PEERS[name][2], url, concurrency, rollouts)
            rows.append((concurrency, limit, sides))
            print(
                f"concurrency {concurrency}: "
                + ", ".join(
                    f"{name} {side['rollouts'] / side['wall_s']:.0f}/s"
                    for name, side in sides.items()
                ),
                file=sys.stderr,
                flush=True,
            )
    finally:
        server.terminate()
        server.wait()
    names = ["emery", *peers]
    load_after = os.getloadavg()
    print(
        f"latency {args.latency * 1000:.0f} ms per call; rollouts/s (ratio to the limit) "
        f"and framework CPU ms per rollout; {os.cpu_count()} CPUs, 1-minute load average "
        f"{load_before[0]:.1f} before and {load_after[0]:.1f} after\n"
    )
    header = (
        ["concurrency", "limit/s"]
        + [f"{n} r/s (ratio)" for n in names]
        + [f"{n} CPU ms" for n in names]
    )
    print("| " + " | ".join(header) + " |")
    print("|" + " --- |" * len(header))
    for concurrency, limit, sides in rows:
        rates = [sides[n]["rollouts"] / sides[n]["wall_s"] for n in names]
        cpu = [1000 * sides[n]["cpu_s"] / sides[n]["rollouts"] for n in names]
        cells = [str(concurrency), f"{limit:.0f}"]
        cells += [f"{rate:.0f} ({rate / limit:.2f})" for rate in rates]
        cells += [f"{ms:.2f}" for ms in cpu]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
