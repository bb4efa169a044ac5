"""Code-harness benchmark (issue 13): per built-in environment, the baseline loop against
the GEPA-searched loop on test (n, 95% interval), proposals compiled / invalid / rejected by
the smoke run / accepted; and the per-episode overhead of the worker-process isolation
against calling the same module in-process.

    .venv/bin/python benchmarks/harness/run.py --overhead-only
    .venv/bin/python benchmarks/harness/run.py --model local/qwen2.5-coder-0.5b --budget 150
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections import Counter
from typing import Any

import emery
from emery.store import MemoryStore
from emery.systems.harness.episode import Episode, Limits, run_in_worker
from emery.systems.harness.kit import Kit
from emery.systems.harness.pool import WorkerPool

ENVIRONMENTS = ("calculator", "kv_store", "files")
TASKS = {"calculator": "harness_calculator", "kv_store": "harness_kv", "files": "harness_files"}
TRIVIAL = "def run(kit):\n    return kit.instruction\n"


async def _overhead(episodes: int) -> dict[str, float]:
    pool = WorkerPool(keep=1)
    limits = Limits(max_llm_calls=1, max_env_actions=1, timeout_s=30.0)
    episode = Episode(env=None, lm=None, limits=limits, tools=[])  # type: ignore[arg-type]
    setup = {"instruction": "x", "system_prompt": "", "tools": [], "skills": {}}
    await run_in_worker(pool, TRIVIAL, setup, episode)  # start the worker once
    start = time.perf_counter()
    for _ in range(episodes):
        await run_in_worker(pool, TRIVIAL, setup, episode)
    isolated = (time.perf_counter() - start) / episodes
    pool.close()
    start = time.perf_counter()
    for _ in range(episodes):
        namespace: dict[str, Any] = {}
        exec(compile(TRIVIAL, "<harness>", "exec"), namespace)
        namespace["run"](Kit(lambda message: {"ok": True}, setup))
    in_process = (time.perf_counter() - start) / episodes
    return {
        "worker_ms": 1000 * isolated,
        "in_process_ms": 1000 * in_process,
        "overhead_ms": 1000 * (isolated - in_process),
    }


def _search(environment: str, model: str, budget: int, seed: int) -> dict[str, Any]:
    store = MemoryStore()
    result = emery.optimize(
        None,
        TASKS[environment],
        algorithm="gepa",
        budget=budget,
        lm=model,
        reflection_lm=model,
        seed=seed,
        settings={"components": ["code:runtime"]},
        store=store,
        progress=False,
    )
    kinds = Counter(event.kind for event in store.list_events(result.job_id))
    smoke = sum(
        1
        for event in store.list_events(result.job_id)
        if event.kind == "gepa.minibatch_rejected"
        and "smoke run" in str(event.data.get("reason", ""))
    )

    def score(value: Any) -> dict[str, Any] | None:
        return None if value is None else value.model_dump(mode="json")

    return {
        "environment": environment,
        "baseline_test": score(result.baseline_test),
        "best_test": score(result.best_test),
        "proposals_compiled": kinds["gepa.proposal"],
        "proposals_invalid": kinds["gepa.proposal_invalid"],
        "rejected_by_smoke_run": smoke,
        "accepted": kinds["gepa.minibatch_accepted"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="local/qwen2.5-coder-0.5b")
    parser.add_argument("--budget", type=int, default=150)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--environments", nargs="*", default=list(ENVIRONMENTS))
    parser.add_argument("--overhead-only", action="store_true")
    args = parser.parse_args()
    report: dict[str, Any] = {"overhead": asyncio.run(_overhead(args.episodes))}
    if not args.overhead_only:
        report["searches"] = [
            _search(env, args.model, args.budget, args.seed) for env in args.environments
        ]
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
