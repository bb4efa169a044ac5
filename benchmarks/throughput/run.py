"""Scored rollouts per second against the limit ``concurrency / latency``, emery beside peers.

Usage: python benchmarks/throughput/run.py [--latency 0.1] [--concurrency 1,8,64,256]
                                           [--per-slot 30] [--peers gepa,dspy]

A mock OpenAI-compatible endpoint (``mock_openai.py``, its own process) answers every call
after a fixed latency, so a framework that adds no overhead scores ``concurrency / latency``
rollouts per second. Each measurement runs in a fresh process, under a deadline
(``--side-timeout``, default 600 s: a side that overruns is killed and its cell says
"stalled", the other sides' figures are kept), over
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
import os
import socket
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "quality"))

from common import ensure_venv  # noqa: E402
from sides import SideResult, run_side  # noqa: E402

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
    python: Path, script: Path, url: str, concurrency: int, rollouts: int, deadline_s: float
) -> SideResult:
    """One side at one concurrency, killed (and recorded as stalled) at ``deadline_s``."""
    command = [str(python), str(script), "--url", url]
    command += ["--concurrency", str(concurrency), "--rollouts", str(rollouts)]
    return run_side(command, deadline_s)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--concurrency", default="1,8,64,256")
    parser.add_argument("--per-slot", type=int, default=30)
    parser.add_argument("--peers", default="gepa,dspy")
    parser.add_argument(
        "--side-timeout",
        type=float,
        default=600.0,
        help="seconds one side may take at one concurrency; past it the side is killed and"
        " recorded as stalled",
    )
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
            scripts = {"emery": (Path(sys.executable), HERE / "emery_side.py")}
            scripts |= {name: (pythons[name], PEERS[name][2]) for name in peers}
            sides = {
                name: measure(python, script, url, concurrency, rollouts, args.side_timeout)
                for name, (python, script) in scripts.items()
            }
            rows.append((concurrency, limit, sides))
            print(
                f"concurrency {concurrency}: "
                + ", ".join(f"{name} {side.rate_cell(limit)}" for name, side in sides.items()),
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
        cells = [str(concurrency), f"{limit:.0f}"]
        cells += [sides[n].rate_cell(limit) for n in names]
        cells += [sides[n].cpu_cell() for n in names]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
