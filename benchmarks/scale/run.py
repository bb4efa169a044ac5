"""The store as a queue, emery beside agent-lightning, side by side in one run.

Usage: .venv/bin/python benchmarks/scale/run.py [--runners 8,32,128] [--rollouts 600]
           [--ops 600] [--postgres URL] [--limit-runners 128] [--agent-s 1.0]
           [--limit-rounds 10] [--sides memory,sqlite,...] [--kills 10] [--output scale.json]

Sides, each in a fresh process (``workload.py`` is the shared protocol driver):

- emery on its in-memory store, a SQLite file and PostgreSQL (``--postgres``, else
  ``$EMERY_TEST_POSTGRES_URL``; without either that column is left out): ``emery_side.py``;
- emery's runners over HTTP (``http-sqlite``, ``http-postgres``): the runner calls through
  ``HttpQueue`` against a fresh ``emery server`` per measurement on that store, one
  ``HttpQueue`` per runner thread, the job's ``add_rollouts`` on the store directly; then
  ``--kills`` runner kills checked for rollouts kept twice (``emery_http_side.py``);
- agent-lightning 0.3.0 (``agentlightning==0.3.0`` in ``.bench-venvs/agentlightning-0.3``,
  made on first run; Python >= 3.10): its ``InMemoryLightningStore`` in-process and its
  client-server store (``agl store`` in its own process, a ``LightningStoreClient`` per
  runner thread) (``peers/agentlightning_side.py``).

Measured: one client's rate of each operation (enqueue, claim, update attempt, add spans,
finish); rollouts/s, spans/s and p99 claim and span-write latency with N runner threads
and a no-op agent; and rollouts/s with ``--limit-runners`` runners whose agent sleeps
``--agent-s``, ``--limit-rounds`` rollouts each, against the limit
``runners / agent_s``. Ratios are emery's figure over agent-lightning's: PostgreSQL and
SQLite against its client-server store, in-memory against its in-memory store; an HTTP
side's over the same store direct and over agent-lightning's client-server store.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent / "quality"))

from common import ensure_venv  # noqa: E402

PEER = ("agentlightning-0.3", ["agentlightning==0.3.0"])
PAIRS = [
    ("postgres", "agl-server"),
    ("sqlite", "agl-server"),
    ("memory", "agl-memory"),
    ("http-postgres", "postgres"),
    ("http-sqlite", "sqlite"),
    ("http-postgres", "agl-server"),
    ("http-sqlite", "agl-server"),
]
SIDES = ("memory", "sqlite", "postgres", "http-sqlite", "http-postgres", "agl-memory", "agl-server")
# agentlightning imports litellm, which otherwise fetches its cost map from GitHub (offline:
# three failed tries, ~8 s per process)
PEER_ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def side(command: list[str], out: Path, timeout_s: float) -> dict[str, Any] | str:
    """Run one side; its JSON, or why there is none."""
    try:
        subprocess.run(command, check=True, timeout=timeout_s, cwd=HERE, env=PEER_ENV)
    except subprocess.TimeoutExpired:
        return f"stalled (no result in {timeout_s:g} s)"
    except subprocess.CalledProcessError as exc:
        return f"failed (exit {exc.returncode})"
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def run_sides(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    wanted = [n for n in args.sides.split(",") if n and (args.postgres or "postgres" not in n)]
    emery = [sys.executable, str(HERE / "emery_side.py")]
    http = [sys.executable, str(HERE / "emery_http_side.py")]
    stores = {"memory": "memory", "sqlite": "sqlite", "postgres": args.postgres}
    common = ["--runners", args.runners, "--rollouts", str(args.rollouts), "--ops", str(args.ops)]
    sides: dict[str, Any] = {}
    for name in [n for n in SIDES if n in wanted and not n.startswith("agl-")]:
        out = work / f"{name}.json"
        store = stores[name.removeprefix("http-")]
        command = [*emery, "--store", store, *common]
        if name.startswith("http-"):
            command = [*http, "--store", store, *common, "--kills", str(args.kills)]
        sides[name] = side([*command, "--out", str(out)], out, 900)
    peer: list[str] = []
    if any(n.startswith("agl-") for n in wanted):
        peer = [str(ensure_venv(*PEER)), str(HERE / "peers" / "agentlightning_side.py")]
    for mode in [m for m in ("memory", "server") if f"agl-{m}" in wanted]:
        out = work / f"agl-{mode}.json"
        sides[f"agl-{mode}"] = side([*peer, "--mode", mode, *common, "--out", str(out)], out, 900)
    limit = ["--runners", str(args.limit_runners), "--ops", "0", "--agent-s", str(args.agent_s)]
    limit += ["--rollouts", str(args.limit_rounds * args.limit_runners)]
    limits: dict[str, Any] = {}
    if not args.limit_rounds:
        return {"sides": sides, "limit": limits}
    for name in [n for n in ("sqlite", "postgres", "http-sqlite", "http-postgres") if n in wanted]:
        out = work / f"limit-{name}.json"
        script = http if name.startswith("http-") else emery
        store = stores[name.removeprefix("http-")]
        limits[name] = side([*script, "--store", store, *limit, "--out", str(out)], out, 900)
    if "agl-server" in wanted:
        out = work / "limit-agl-server.json"
        command = [*peer, "--mode", "server", *limit, "--out", str(out)]
        limits["agl-server"] = side(command, out, 900)
    return {"sides": sides, "limit": limits}


def fmt(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.1f}"


def ratio(a: Any, b: Any) -> str:
    return f"{a / b:.2f}x" if isinstance(a, float) and isinstance(b, float) and b else "-"


def report(results: dict[str, Any], args: argparse.Namespace) -> str:
    sides = {k: v for k, v in results["sides"].items() if isinstance(v, dict)}
    names = list(sides)
    pairs = [(a, b) for a, b in PAIRS if a in sides and b in sides]
    lines = [f"load average before: {results['load']}", ""]
    ops_names = [n for n in names if "ops" in sides[n]]
    for key, v in results["sides"].items():
        if not isinstance(v, dict):
            lines.append(f"{key}: {v}")
    head = ["", *names, *(f"{a} / {b}" for a, b in pairs)]
    ops_pairs = [(a, b) for a, b in pairs if a in ops_names and b in ops_names]
    if ops_names:
        ops_head = ["", *ops_names, *(f"{a} / {b}" for a, b in ops_pairs)]
        lines += ["One client, operations per second (spans: spans per second)", ""]
        lines += ["| " + " | ".join(ops_head) + " |", "|" + " --- |" * len(ops_head)]
        for op in ("enqueue", "claim", "update", "spans", "finish"):
            cells = [fmt(sides[n]["ops"][op]) for n in ops_names]
            cells += [ratio(sides[a]["ops"][op], sides[b]["ops"][op]) for a, b in ops_pairs]
            lines.append(f"| {op} | " + " | ".join(cells) + " |")
    for metric in ("rollouts_per_s", "spans_per_s", "claim_p99_ms", "spans_p99_ms"):
        lines += ["", f"{metric}, N runner threads, no-op agent", ""]
        lines += ["| N | " + " | ".join(head[1:]) + " |", "|" + " --- |" * len(head)]
        for n in args.runners.split(","):
            cells = [fmt(sides[s]["runners"][n][metric]) for s in names]
            cells += [
                ratio(sides[a]["runners"][n][metric], sides[b]["runners"][n][metric])
                for a, b in pairs
            ]
            lines.append(f"| {n} | " + " | ".join(cells) + " |")
    http = [n for n in names if n.startswith("http-")]
    if http:
        lines += ["", "emery server's CPU (cores used) / the runner process's, no-op agent", ""]
        lines += ["| N | " + " | ".join(http) + " |", "|" + " --- |" * (len(http) + 1)]
        for n in args.runners.split(","):
            cells = [
                f"{sides[s]['runners'][n]['server_cpu']:.2f} / "
                f"{sides[s]['runners'][n]['client_cpu']:.2f}"
                for s in http
            ]
            lines.append(f"| {n} | " + " | ".join(cells) + " |")
        for name in http:
            if "kills" in sides[name]:
                lines += ["", f"{name}, runner kills: {json.dumps(sides[name]['kills'])}"]
    if not results["limit"]:
        return "\n".join(lines)
    limit = args.limit_runners / args.agent_s
    lines += [
        "",
        f"{args.limit_runners} runners, a {args.agent_s:g} s agent: rollouts/s"
        f" against the limit {limit:g}/s",
        "",
    ]
    for name, value in results["limit"].items():
        if isinstance(value, dict):
            got = value["runners"][str(args.limit_runners)]["rollouts_per_s"]
            lines.append(f"- {name}: {got:.1f} rollouts/s = {got / limit:.2f} of the limit")
        else:
            lines.append(f"- {name}: {value}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runners", default="8,32,128")
    parser.add_argument("--rollouts", type=int, default=600)
    parser.add_argument("--ops", type=int, default=600)
    parser.add_argument("--postgres", default=os.environ.get("EMERY_TEST_POSTGRES_URL"))
    parser.add_argument("--limit-runners", type=int, default=128)
    parser.add_argument("--agent-s", type=float, default=1.0)
    parser.add_argument(
        "--limit-rounds", type=int, default=10, help="rollouts per runner (0: no limit run)"
    )
    parser.add_argument("--sides", default=",".join(SIDES), help="a subset of " + ",".join(SIDES))
    parser.add_argument(
        "--kills", type=int, default=10, help="runner kills checked on each http- side (0: none)"
    )
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args()
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    with tempfile.TemporaryDirectory() as work:
        results = {"load": load, **run_sides(args, Path(work))}
    results["load_after"] = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(report(results, args))
    print(f"\nload average after: {results['load_after']}")
    if args.output is not None:
        args.output.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
