"""Code-harness benchmark (issue 13): per built-in environment, the baseline loop against
the searched loop (GEPA or APO on ``code:runtime``) on test (n, 95% interval), the test
episodes of each by stop reason (read back from the stored spans), proposals compiled /
invalid / rejected by the smoke run / accepted; and the per-episode overhead of the
episode-process isolation against calling the same module in-process. See README.md.

    .venv/bin/python benchmarks/harness/run.py --overhead-only
    .venv/bin/python benchmarks/harness/run.py                      # calculator, ~10 min
    .venv/bin/python benchmarks/harness/run.py --algorithm apo --environments kv_store
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from collections import Counter
from typing import Any

import emery
from emery.algorithms.code_proposals import SMOKE_FAILED
from emery.lm.base import LM
from emery.store import MemoryStore
from emery.store.protocol import Store
from emery.store.records import EvaluationFilter, SpanFilter
from emery.systems.harness.code import CODE_COMPONENT
from emery.systems.harness.episode import Episode, Limits, run_in_process
from emery.systems.harness.kit import Kit
from emery.systems.harness.pool import CodeProcessPool
from emery.tracing.conventions import ANNOTATION_JSON, ANNOTATION_SPAN

ENVIRONMENTS = ("calculator", "kv_store", "files")
TASKS = {"calculator": "harness_calculator", "kv_store": "harness_kv", "files": "harness_files"}
STOP_REASONS = ("answer", "budget", "timeout", "exception", "exit", "crash", "invalid")
MISSING = "missing"
"""A test episode with no stop-reason annotation in its spans (it never ran the code)."""
TRIVIAL = "def run(kit):\n    return kit.instruction\n"


async def _overhead(episodes: int) -> dict[str, float]:
    pool = CodeProcessPool(keep=1)
    limits = Limits(max_llm_calls=1, max_env_actions=1, timeout_s=30.0)
    episode = Episode(env=None, lm=None, limits=limits, tools=[])  # type: ignore[arg-type]
    setup = {"instruction": "x", "system_prompt": "", "tools": [], "skills": {}}
    await run_in_process(pool, TRIVIAL, setup, episode)  # start the process once
    start = time.perf_counter()
    for _ in range(episodes):
        await run_in_process(pool, TRIVIAL, setup, episode)
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


def stop_reasons(store: Store, job_id: str, candidate_id: str) -> dict[str, int]:
    """``candidate_id``'s test episodes counted by stop reason, from the ``harness.stop_reason``
    annotation spans of their rollouts (every known reason listed, zeros included)."""
    records = store.list_evaluations(
        EvaluationFilter(job_id=job_id, candidate_id=candidate_id, split="test"), limit=None
    ).items
    counts = Counter(dict.fromkeys(STOP_REASONS, 0))
    for record in records:
        counts[_stop_reason(store, record.rollout_id)] += 1
    return dict(counts)


def _stop_reason(store: Store, rollout_id: str | None) -> str:
    if rollout_id is None:
        return MISSING
    spans = store.list_spans(SpanFilter(rollout_id=rollout_id, name=ANNOTATION_SPAN), limit=None)
    for span in reversed(spans.items):
        note = json.loads(str(span.attributes.get(ANNOTATION_JSON, "{}")))
        if isinstance(note, dict) and "harness.stop_reason" in note:
            return str(note["harness.stop_reason"])
    return MISSING


def search_settings(algorithm: str, args: argparse.Namespace) -> dict[str, Any]:
    """Small searches on the code component only."""
    if algorithm == "apo":
        return {
            "components": [CODE_COMPONENT],
            "beam_width": 1,
            "branch_factor": args.proposals,
            "rounds": 1,
            "gradient_batch_size": 2,
            "val_batch_size": args.n_val,
        }
    return {
        "components": [CODE_COMPONENT],
        "minibatch_size": 2,
        "use_merge": False,
        "max_iterations": args.proposals,
    }


def proposal_counts(store: Store, job_id: str, algorithm: str) -> dict[str, int]:
    """Proposals of new modules: compiled, invalid, rejected by the smoke run, accepted."""
    events = store.list_events(job_id)
    kinds = Counter(event.kind for event in events)
    if algorithm == "apo":
        edits = [
            e.data
            for e in events
            if e.kind == "apo.edit" and e.data.get("component") == CODE_COMPONENT
        ]
        checkpoint = store.get_checkpoint(job_id)
        state = checkpoint.state if checkpoint is not None else {}
        return {
            "proposals_compiled": sum(1 for e in edits if e.get("proposal") is not None),
            "proposals_invalid": int(state.get("code_invalid", 0)),
            "rejected_by_smoke_run": int(state.get("smoke_rejected", 0)),
            "accepted": int(state.get("sources", {}).get("apo_edit", {}).get("accepted", 0)),
        }
    smoke = sum(
        1
        for e in events
        if e.kind == "gepa.minibatch_rejected"
        and str(e.data.get("reason", "")).startswith(SMOKE_FAILED)
    )
    return {
        "proposals_compiled": kinds["gepa.proposal"],
        "proposals_invalid": kinds["gepa.proposal_invalid"],
        "rejected_by_smoke_run": smoke,
        "accepted": kinds["gepa.minibatch_accepted"],
    }


def search(
    environment: str,
    args: argparse.Namespace,
    lm: str | LM | None = None,
    reflection_lm: str | LM | None = None,
) -> dict[str, Any]:
    """One search on ``environment``: test scores, stop reasons and proposal counts."""
    store = MemoryStore()
    system = {
        "kind": "code_harness",
        "environment": environment,
        "max_llm_calls": args.max_llm_calls,
        "max_env_actions": args.max_env_actions,
        "timeout_s": args.episode_timeout,
    }
    dataset = {"task": TASKS[environment], "n_train": 6, "n_val": args.n_val, "n_test": args.n_test}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="emery-harness-") as workdir:
        result = emery.optimize(
            system,
            dataset,
            algorithm=args.algorithm,
            budget=args.budget,
            lm=lm or args.model,
            reflection_lm=reflection_lm or args.reflection_model or args.model,
            seed=args.seed,
            settings=search_settings(args.algorithm, args),
            runtime={"workdir": workdir, "concurrency": args.concurrency},
            store=store,
            progress=args.progress,
        )
    seed, best = result.seed_candidate, result.best_candidate or result.seed_candidate

    def score(value: Any) -> dict[str, Any] | None:
        return None if value is None else value.model_dump(mode="json")

    return {
        "environment": environment,
        "algorithm": args.algorithm,
        "state": result.state,
        "minutes": round((time.perf_counter() - started) / 60, 2),
        "baseline_test": score(result.baseline_test),
        "best_test": score(result.best_test),
        "best_changed_code": best is not None
        and seed is not None
        and best.components.get(CODE_COMPONENT) != seed.components.get(CODE_COMPONENT),
        "baseline_stop_reasons": stop_reasons(store, result.job_id, seed.id) if seed else {},
        "best_stop_reasons": stop_reasons(store, result.job_id, best.id) if best else {},
        **proposal_counts(store, result.job_id, args.algorithm),
    }


def parser() -> argparse.ArgumentParser:
    """The command line; the defaults fit one environment in about 10 minutes on 2 cores."""
    cli = argparse.ArgumentParser(
        description="Code-harness benchmark: the baseline loop against the searched loop."
    )
    cli.add_argument("--model", default="local/qwen2.5-coder-0.5b", help="task model")
    cli.add_argument("--reflection-model", default=None, help="proposing model (default: --model)")
    cli.add_argument("--algorithm", choices=("gepa", "apo"), default="gepa")
    cli.add_argument("--environments", nargs="*", default=["calculator"], choices=ENVIRONMENTS)
    cli.add_argument("--budget", type=int, default=20, help="metric calls of the search")
    cli.add_argument("--proposals", type=int, default=3, help="GEPA iterations / APO branches")
    cli.add_argument("--n-val", type=int, default=4)
    cli.add_argument("--n-test", type=int, default=8)
    cli.add_argument("--max-llm-calls", type=int, default=6, help="per episode")
    cli.add_argument("--max-env-actions", type=int, default=8, help="per episode")
    cli.add_argument("--episode-timeout", type=float, default=90.0, help="seconds per episode")
    cli.add_argument("--concurrency", type=int, default=4)
    cli.add_argument("--seed", type=int, default=0)
    cli.add_argument("--episodes", type=int, default=200, help="episodes of the overhead test")
    cli.add_argument("--overhead-only", action="store_true")
    cli.add_argument("--progress", action="store_true", help="print events to stderr")
    return cli


def main() -> None:
    args = parser().parse_args()
    report: dict[str, Any] = {"overhead": asyncio.run(_overhead(args.episodes))}
    if not args.overhead_only:
        report["searches"] = [search(env, args) for env in args.environments]
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
