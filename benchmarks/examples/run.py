"""Run each example of ``examples/`` as its README says, on the embedded local model, and
print its seed and winner on test (n, 95% intervals), the lift and the wall time.

    nice -n 10 .venv/bin/python benchmarks/examples/run.py --out /tmp/examples.json [--resume]

Each example runs in a subprocess with a store of its own under ``--root`` (kept, so a run
cut short resumes where it was with ``--resume``): the task-app examples through their
``run.py``, the others with ``emery train examples/<folder>/job.toml``; then ``emery
report --json`` reads the result.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
TASK_APPS = ("langgraph_agent", "openai_agent", "openai_agents_sdk")
IN_PROCESS = ("classification", "rag_rubric", "harness_agent", "custom_algorithm")


def command(name: str, store: Path, extra: list[str]) -> list[str]:
    """How the example's README runs it, with its own store."""
    if name in TASK_APPS:
        return [sys.executable, str(EXAMPLES / name / "run.py"), "--store", str(store), *extra]
    job = EXAMPLES / name / "job.toml"
    return [sys.executable, "-m", "emery", "train", str(job), "--store", str(store), *extra]


def run_example(name: str, root: Path, extra: list[str], timeout_s: float) -> dict[str, Any]:
    store = root / f"{name}.db"
    started = time.monotonic()
    try:
        code = subprocess.call(command(name, store, extra), cwd=EXAMPLES / name, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        code = None
    wall_s = time.monotonic() - started
    job = tomllib.loads((EXAMPLES / name / "job.toml").read_text())["job"]["name"]
    report = subprocess.run(
        [sys.executable, "-m", "emery", "report", job, "--json", "--store", str(store)],
        capture_output=True,
        text=True,
        check=False,
    )
    row: dict[str, Any] = {"example": name, "exit": code, "wall_s": round(wall_s, 1)}
    if report.returncode != 0:
        return {**row, "error": report.stderr.strip()[-300:]}
    result = json.loads(report.stdout)
    return {
        **row,
        "state": result.get("state"),
        "algorithm": result.get("algorithm"),
        "metric_calls": (result.get("budget") or {}).get("metric_calls"),
        "seed_test": result.get("baseline_test"),
        "best_test": result.get("best_test"),
        "lift": result.get("lift_abs"),
        "lift_split": result.get("lift_split"),
    }


def score(summary: dict[str, Any] | None) -> str:
    if not summary:
        return "-"
    return f"{summary['mean']:.1%} ({summary['low']:.1%}-{summary['high']:.1%}, n={summary['n']})"


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        f"{'example':<18} {'state':<10} {'calls':>5} {'seed on test':<28} "
        f"{'best on test':<28} {'lift':>7} {'wall':>7}"
    )
    lines = [head, "-" * len(head)]
    for row in rows:
        lift = row.get("lift")
        lines.append(
            f"{row['example']:<18} {row.get('state') or row.get('error', '?')[:10]:<10} "
            f"{row.get('metric_calls') or '-':>5} {score(row.get('seed_test')):<28} "
            f"{score(row.get('best_test')):<28} "
            f"{f'{lift:+.1%}' if lift is not None else '-':>7} {row['wall_s'] / 60:>6.1f}m"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", nargs="+", default=[*TASK_APPS, *IN_PROCESS])
    parser.add_argument("--root", type=Path, default=Path("/tmp/emery-examples"))
    parser.add_argument("--out", type=Path, default=None, help="JSON of the rows")
    parser.add_argument("--resume", action="store_true", help="keep the rows in --out")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per example")
    args, extra = parser.parse_known_args()
    args.root.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    if args.resume and args.out is not None and args.out.exists():
        rows = [r for r in json.loads(args.out.read_text())["rows"] if r.get("state")]
    for name in args.examples:
        if any(r["example"] == name for r in rows):
            continue
        print(f"{name} ...", file=sys.stderr, flush=True)
        rows.append(run_example(name, args.root, extra, args.timeout))
        if args.out is not None:
            args.out.write_text(json.dumps({"rows": rows}, indent=2) + "\n")
    print(table([r for r in rows if r["example"] in args.examples]))


if __name__ == "__main__":
    main()
