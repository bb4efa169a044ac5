"""Search jobs against a rate-limited provider (``simulator.py``): per algorithm, one
``emery train`` job against the unlimited simulator (no limits, no faults), then two against
``--rpm`` requests and ``--tpm`` tokens per minute per model with its faults (1% answered
500, 0.5% hung for 30 s): one with no client-side limits (the provider's 429s alone pace
the job) and one with ``requests_per_minute`` / ``tokens_per_minute`` set to the
provider's limits on every model. Every job: the built-in word problems (16/16/8), the
scripted task and reflection models behind the simulator (``openai/task``,
``openai/reflection``), ``[runtime] concurrency = 32``, a metric-call budget of
``--budget``.

Prints one table: algorithm, limit, client-side limits, the job's end state, wall time,
answered requests per minute of the busiest model over its busy period and its ratio to
``--rpm`` (and to what the buckets allowed in that period, a full bucket included), the
429s the simulator sent, rollouts failed (all, and those whose error is a rate limit), and
whether the search result equals the unlimited run's (the same candidate ids in the same
order with the same val scores and counts, the same best candidate).

Usage: python benchmarks/providers/run.py [--algorithms gepa mipro] [--budget 120]
       [--rpm 60] [--tpm 40000] [--out providers.json] [--resume]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reliability"))

from search_jobs import emery_env, only_job, run_emery
from simulator import ProviderSimulator

SETTINGS = ("unlimited", "provider", "client")
"""The rows per algorithm: no limits and no faults; the provider's limits and faults with
no client-side limits; the same with the client-side limits set to the provider's."""
CLIENT_TIMEOUT_S = 10.0  # the model client's request timeout; a hang lasts 30 s
RATE_LIMITED = re.compile(r"429|rate.?limit", re.IGNORECASE)


def job_config(
    algorithm: str, base_url: str, workdir: Path, budget: int, client_limits: str
) -> str:
    """The job: ``algorithm`` on 16/16/8 word problems, every model behind ``base_url``,
    ``client_limits`` (TOML lines) in each model's table."""
    models = ""
    for role, name in (("task", "task"), ("reflection", "reflection"), ("proposer", "reflection")):
        models += (
            f'[lm.{role}]\nmodel = "openai/{name}"\nbase_url = "{base_url}"\n'
            f"concurrency = 32\ntimeout_s = {CLIENT_TIMEOUT_S}\n{client_limits}"
        )
    return (
        f'[job]\nalgorithm = "{algorithm}"\nseed = 3\n[job.budget]\nmetric_calls = {budget}\n'
        '[dataset]\ntask = "word_problems"\nn_train = 16\nn_val = 16\nn_test = 8\n'
        f'{models}[verifier]\nkind = "numeric"\n'
        f'[runtime]\nworkdir = "{workdir.as_posix()}"\nconcurrency = 32\n'
    )


def simulator_settings(setting: str, args: argparse.Namespace) -> dict[str, Any]:
    """The simulator's settings for a row: its default latency, and for the limited rows
    the limits and its default faults."""
    if setting == "unlimited":
        return {"error_rate": 0.0, "hang_rate": 0.0, "seed": args.seed}
    return {"rpm": args.rpm, "tpm": args.tpm, "burst_s": args.burst_s, "seed": args.seed}


def read_job(store: Path) -> dict[str, Any]:
    """The job's end state, result and candidates (in order, with val scores), and its
    failed rollouts, from its store."""
    from emery.store import SQLiteStore
    from emery.store.records import EvaluationFilter

    job = only_job(store)
    db = SQLiteStore(store)
    try:
        candidates = db.list_candidates(job.id, split="val", sort="ordinal", limit=None).items
        failed = db.list_evaluations(
            EvaluationFilter(job_id=job.id, errors_only=True), limit=None
        ).items
    finally:
        db.close()
    result = dict(job.result or {})
    errors = [str(e.result.error) for e in failed]
    return {
        "state": job.state,
        "stop_reason": result.get("stop_reason"),
        "best_candidate": result.get("best_candidate"),
        "best_val": result.get("best_val"),
        "candidates": [[c.id, c.score, c.n] for c in candidates],
        "failed_rollouts": len(errors),
        "failed_rate_limited": sum(bool(RATE_LIMITED.search(e)) for e in errors),
        "failed_examples": errors[:3],
    }


def run_row(algorithm: str, setting: str, args: argparse.Namespace, root: Path) -> dict[str, Any]:
    """One job against a fresh simulator; what it did and what the simulator saw."""
    folder = root / f"{algorithm}-{setting}"
    folder.mkdir(parents=True)
    client = ""
    if setting == "client":
        client = f"requests_per_minute = {args.rpm}\ntokens_per_minute = {args.tpm}\n"
    sim = simulator_settings(setting, args)
    with ProviderSimulator(**sim) as server:
        path = folder / "job.toml"
        path.write_text(
            job_config(algorithm, server.base_url, folder / "work", args.budget, client)
        )
        store = folder / "emery.db"
        started = time.monotonic()
        done = run_emery(
            ["train", str(path), "--store", str(store), "--stream-format", "none"],
            emery_env(),
            folder,
            timeout_s=args.timeout,
        )
        wall = time.monotonic() - started
        summary = server.summary()
    row: dict[str, Any] = {
        "algorithm": algorithm,
        "setting": setting,
        "budget": args.budget,
        "rpm": args.rpm,
        "tpm": args.tpm,
        "exit": done.returncode,
        "wall_s": round(wall, 1),
        "simulator": summary,
        "stderr_tail": done.stderr.strip().splitlines()[-3:],
    }
    try:
        row.update(read_job(store))
    except Exception as exc:  # no job stored: the config was refused
        row.update({"state": "none", "error": f"{type(exc).__name__}: {exc}"})
    return row


def busiest(summary: dict[str, Any]) -> dict[str, Any]:
    """The model with the most answered requests."""
    models = summary.get("models") or {}
    if not models:
        return {}
    return max(models.values(), key=lambda m: m.get("answered", 0))


def judge(row: dict[str, Any], unlimited: dict[str, Any] | None) -> None:
    """Add the rate figures and whether the result equals the unlimited run's."""
    model = busiest(row["simulator"])
    per_minute = model.get("answered_per_minute")
    row["answered_per_minute"] = per_minute
    row["ratio"] = round(per_minute / row["rpm"], 2) if per_minute else None
    settings = row["simulator"]["settings"]
    if settings["rpm"] and model.get("busy_s"):
        allowed = settings["rpm"] * (settings["burst_s"] + model["busy_s"]) / 60
        row["of_allowed"] = round(model["answered"] / allowed, 2)
    else:
        row["of_allowed"] = None
    if unlimited is None or row["setting"] == "unlimited":
        row["same_result"] = None
        return
    keys = ("candidates", "best_candidate", "best_val")
    row["same_result"] = row.get("state") == "succeeded" and all(
        row.get(key) == unlimited.get(key) for key in keys
    )


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        f"{'algorithm':<9} {'limit':<16} {'client limits':<13} {'state':<10} {'wall s':>7} "
        f"{'req/min':>8} {'ratio':>6} {'allowed':>7} {'429s':>5} {'failed':>6} "
        f"{'429-failed':>10}  same result"
    )
    lines = [head, "-" * len(head)]
    for row in rows:
        limit = (
            "none" if row["setting"] == "unlimited" else f"{row['rpm']:g} rpm/{row['tpm']:g} tpm"
        )
        client = {"unlimited": "-", "provider": "no (429s)", "client": "yes"}[row["setting"]]
        same = {None: "-", True: "yes", False: "NO"}[row.get("same_result")]
        rate = row.get("answered_per_minute")
        lines.append(
            f"{row['algorithm']:<9} {limit:<16} {client:<13} {row.get('state', '?'):<10} "
            f"{row['wall_s']:>7.1f} {rate if rate is not None else '-':>8} "
            f"{row.get('ratio') if row.get('ratio') is not None else '-':>6} "
            f"{row.get('of_allowed') if row.get('of_allowed') is not None else '-':>7} "
            f"{row['simulator']['429']:>5} {row.get('failed_rollouts', '-'):>6} "
            f"{row.get('failed_rate_limited', '-'):>10}  {same}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algorithms", nargs="+", default=["gepa", "mipro"])
    parser.add_argument("--budget", type=int, default=120, help="metric calls per job")
    parser.add_argument("--rpm", type=float, default=60.0)
    parser.add_argument("--tpm", type=float, default=40_000.0)
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=SETTINGS)
    parser.add_argument("--burst-s", type=float, default=60.0, help="the buckets' size, s")
    parser.add_argument("--seed", type=int, default=0, help="the simulator's seed")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per job")
    parser.add_argument("--out", type=Path, default=None, help="JSON of the rows")
    parser.add_argument("--resume", action="store_true", help="keep the rows in --out")
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    if args.resume and args.out is not None and args.out.exists():
        rows = json.loads(args.out.read_text())["rows"]
    root = Path(tempfile.mkdtemp(prefix="emery-providers-"))
    try:
        for algorithm in args.algorithms:
            for setting in args.settings:
                if any(r["algorithm"] == algorithm and r["setting"] == setting for r in rows):
                    continue
                print(f"{algorithm} {setting} ...", file=sys.stderr, flush=True)
                row = run_row(algorithm, setting, args, root)
                rows.append(row)
                unlimited = next(
                    (
                        r
                        for r in rows
                        if r["algorithm"] == algorithm and r["setting"] == "unlimited"
                    ),
                    None,
                )
                judge(row, unlimited)
                if args.out is not None:
                    args.out.write_text(json.dumps({"rows": rows}, indent=2) + "\n")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    shown = [r for r in rows if r["algorithm"] in args.algorithms]
    order = {s: i for i, s in enumerate(SETTINGS)}
    shown.sort(key=lambda r: (args.algorithms.index(r["algorithm"]), order[r["setting"]]))
    print(table(shown))


if __name__ == "__main__":
    main()
