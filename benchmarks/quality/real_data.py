"""emery's algorithms on real data, run as a user would: `emery train` on a job config.

Each row is one `emery train CONFIG` in a subprocess with the algorithm (and optionally
the budget and split sizes) overridden; every row shares one store and one response cache,
so the seed and the hand-written expert prompt (``[references.expert]``) are scored on
test once and read back from the cache by the later rows. The job itself scores the seed,
the winner and the references on the test split the search never saw.

    .venv/bin/python benchmarks/quality/real_data.py benchmarks/quality/real/svamp.toml \\
        --algorithms mipro,gepa,apo --output svamp.json

Prints one markdown row per algorithm: test scores with n and 95% intervals (seed, expert,
best), the lift over each, val scores, metric calls, LM calls and tokens by role, wall time.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def _pct(summary: dict[str, Any] | None) -> str:
    if not summary:
        return "—"
    return f"{summary['mean']:.1%} ({summary['low']:.1%}–{summary['high']:.1%}, n={summary['n']})"


def _fraction(value: Any) -> str:
    return "—" if value is None else f"{value:.1%}"


def _toml_value(value: Any) -> str:
    return json.dumps(value)


def job_config(base: Path, algorithm: str, args: argparse.Namespace, workdir: Path) -> Path:
    """A copy of ``base`` with the algorithm, budget and sizes overridden (TOML appended)."""
    config = tomllib.loads(base.read_text())
    text = base.read_text()
    dataset_path = (base.parent / config["dataset"]["path"]).resolve()
    text = text.replace(f'path = "{config["dataset"]["path"]}"', f'path = "{dataset_path}"')
    text = text.replace(
        f'algorithm = "{config["job"]["algorithm"]}"', f'algorithm = "{algorithm}"', 1
    )
    for key in ("metric_calls", "wall_time_s"):
        value = getattr(args, key)
        if value is not None:
            old = f"{key} = {config['job']['budget'][key]}"
            text = text.replace(old, f"{key} = {value}", 1)
    for key in ("n_train", "n_val", "n_test"):
        value = getattr(args, key)
        if value is not None:
            text = text.replace(f"{key} = {config['dataset'][key]}", f"{key} = {value}", 1)
    out = workdir / f"{base.stem}-{algorithm}.toml"
    out.write_text(text)
    return out


def run_row(config: Path, store: Path) -> dict[str, Any]:
    """`emery train CONFIG --json` in a subprocess; its result plus the wall time."""
    emery = Path(sys.executable).with_name("emery")
    started = time.perf_counter()
    command = [str(emery), "train", str(config), "--json", "--new", "--stream-format", "none"]
    child = subprocess.Popen(
        [*command, "--store", str(store)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        stdout, stderr = child.communicate()
    finally:  # a stopped benchmark stops its job too (SIGTERM is made an exit in main)
        if child.poll() is None:
            child.terminate()
            child.wait()
    wall = time.perf_counter() - started
    if child.returncode != 0:
        raise SystemExit(f"{config.name}: emery train failed ({child.returncode}): {stderr}")
    payload: dict[str, Any] = json.loads(stdout)["result"]
    payload["wall_s"] = wall
    return payload


def row_markdown(name: str, result: dict[str, Any]) -> str:
    best = result.get("best_test") or {}
    seed = result.get("baseline_test") or {}
    expert = (result.get("references_test") or {}).get("expert") or {}
    usage = result.get("usage") or {}
    calls = ", ".join(
        f"{role} {u['calls']} ({u['prompt_tokens']:,}+{u['completion_tokens']:,} tok)"
        for role, u in sorted(usage.items())
        if u.get("calls")
    )

    def lift(ref: dict[str, Any]) -> str:
        return f"{(best['mean'] - ref['mean']) * 100:+.1f}" if best and ref else "—"

    return (
        f"| {name} | {_pct(seed)} | {_pct(expert)} | {_pct(best)} | {lift(seed)} | "
        f"{lift(expert)} | {_fraction(result.get('baseline_val'))} → "
        f"{_fraction(result.get('best_val'))} | "
        f"{(result.get('budget') or {}).get('metric_calls')} | {calls} | "
        f"{result['wall_s'] / 60:.1f} min |"
    )


HEADER = (
    "| run | seed (test) | expert (test) | best (test) | vs seed | vs expert | val seed → best "
    "| metric calls | LM calls by role | wall |\n|---|---|---|---|---|---|---|---|---|---|"
)


def _exit_on_signal(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", type=Path)
    parser.add_argument("--algorithms", default="mipro,gepa,apo")
    parser.add_argument("--metric-calls", dest="metric_calls", type=int, default=None)
    parser.add_argument("--wall-time", dest="wall_time_s", type=int, default=None)
    parser.add_argument("--n-train", dest="n_train", type=int, default=None)
    parser.add_argument("--n-val", dest="n_val", type=int, default=None)
    parser.add_argument("--n-test", dest="n_test", type=int, default=None)
    parser.add_argument("--workdir", type=Path, default=ROOT / ".bench-real")
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, _exit_on_signal)
    args.workdir.mkdir(parents=True, exist_ok=True)
    store = args.workdir / "emery.db"
    rows: dict[str, dict[str, Any]] = {}
    print(HEADER, flush=True)
    for algorithm in args.algorithms.split(","):
        config = job_config(args.config, algorithm, args, args.workdir)
        rows[algorithm] = run_row(config, store)
        print(row_markdown(f"emery {algorithm}", rows[algorithm]), flush=True)
        if args.output is not None:
            args.output.write_text(json.dumps(rows, indent=2, default=str))


if __name__ == "__main__":
    main()
