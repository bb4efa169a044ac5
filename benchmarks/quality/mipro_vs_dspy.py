"""MIPRO against DSPy's MIPROv2: one local model behind one OpenAI-compatible endpoint.

Both sides optimize the word problems (seed instruction "Answer the question.") with the
same model as task and proposer model, served by ``llama_cpp.server``; the same train,
val and test examples; the same numbers of candidates, trials, minibatch size and
full-evaluation interval. emery's metric-call budget is set to what DSPy's plan says it
will spend, and both sides' actual metric calls are counted and printed. Response caches
are off on both sides. Prints test accuracy, metric calls, LM calls, tokens and wall time
side by side with emery/DSPy ratios.

DSPy runs in its own virtual environment, which also serves the model (emery's does not
install the server extras). Set it up once:

    python3 -m venv .bench-venvs/dspy
    .bench-venvs/dspy/bin/pip install dspy==3.4.1 optuna==5.0.0 \\
        "llama-cpp-python[server]==0.3.36"

Then:

    .venv/bin/python benchmarks/quality/mipro_vs_dspy.py            # qwen; hours on 2 cores
    .venv/bin/python benchmarks/quality/mipro_vs_dspy.py --smoke    # smollm, tiny budget
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from emery.algorithms import build_algorithm, run_search
from emery.algorithms.context import build_search_context
from emery.algorithms.mipro import MiproState
from emery.config import parse_config
from emery.config.resolve import build_models, resolve_dataset, resolve_system, resolve_verifier
from emery.core.models import Candidate, Dataset
from emery.lm.catalog import installed_path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
BENCH_PYTHON = ROOT / ".bench-venvs" / "dspy" / "bin" / "python"


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b", help="a local model name")
    parser.add_argument("--instruction", default="Answer the question.")
    parser.add_argument("--n-train", type=int, default=30)
    parser.add_argument("--n-val", type=int, default=30)
    parser.add_argument("--n-test", type=int, default=50)
    parser.add_argument("--num-candidates", type=int, default=6)
    parser.add_argument("--num-trials", type=int, default=12)
    parser.add_argument("--minibatch-size", type=int, default=15)
    parser.add_argument("--full-eval-every", type=int, default=5)
    parser.add_argument("--max-demos", type=int, default=3)
    parser.add_argument("--task-max-tokens", type=int, default=200)
    parser.add_argument("--proposer-max-tokens", type=int, default=300)
    parser.add_argument("--dspy-module", choices=["cot", "predict"], default="cot")
    parser.add_argument("--n-threads", type=int, default=1, help="llama.cpp threads")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--smoke", action="store_true", help="SmolLM2 and a tiny budget")
    args = parser.parse_args()
    if args.smoke:
        args.model = "smollm2-135m"
        args.n_train, args.n_val, args.n_test = 5, 4, 3
        args.num_candidates, args.num_trials, args.minibatch_size = 3, 2, 2
        args.full_eval_every, args.max_demos = 2, 1
        args.task_max_tokens, args.proposer_max_tokens = 48, 64
    return args


def dspy_metric_calls(args: argparse.Namespace) -> int:
    """DSPy's own plan for its search (minibatches and full evaluations) plus one pass of
    bootstrapping over train: the budget emery gets."""
    full_evals = args.num_trials // args.full_eval_every + 1
    return args.minibatch_size * args.num_trials + args.n_val * full_evals + args.n_train


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def model_server(args: argparse.Namespace, log: Path) -> Iterator[str]:
    """``llama_cpp.server`` on a free loopback port; yields its base URL."""
    port = free_port()
    command = [
        str(BENCH_PYTHON),
        "-m",
        "llama_cpp.server",
        "--model",
        str(installed_path(args.model)),
        "--model_alias",
        "task",
        "--n_ctx",
        "4096",
        "--n_threads",
        str(args.n_threads),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    with log.open("w") as sink:
        server = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT)
        base_url = f"http://127.0.0.1:{port}/v1"
        try:
            deadline = time.monotonic() + 180
            while True:
                if server.poll() is not None:
                    raise RuntimeError(f"the model server exited; see {log}")
                try:
                    with urllib.request.urlopen(f"{base_url}/models", timeout=5):
                        break
                except OSError:
                    if time.monotonic() > deadline:
                        raise RuntimeError("the model server did not start in 180 s") from None
                    time.sleep(1)
            yield base_url
        finally:
            server.terminate()
            server.wait(timeout=30)


def write_data(dataset: Dataset, path: Path) -> None:
    rows = {
        split: [
            {"id": e.id, "question": e.input["question"], "answer": e.expected}
            for e in dataset.split(split)
        ]
        for split in ("train", "val", "test")
    }
    path.write_text(json.dumps(rows))


def emery_config(args: argparse.Namespace, base_url: str) -> dict[str, Any]:
    def lm(name: str, max_tokens: int) -> dict[str, Any]:
        return {
            "model": f"openai/{name}",
            "base_url": base_url,
            "api_key": "local",
            "max_tokens": max_tokens,
            "cache": False,
            "concurrency": 2,
        }

    return {
        "job": {
            "algorithm": "mipro",
            "seed": args.seed,
            "budget": {"metric_calls": dspy_metric_calls(args)},
        },
        "dataset": {
            "task": "word_problems",
            "n_train": args.n_train,
            "n_val": args.n_val,
            "n_test": args.n_test,
        },
        "lm": {
            "task": lm("task", args.task_max_tokens),
            "proposer": lm("proposer", args.proposer_max_tokens),
        },
        "runtime": {"cache": False},
        "algorithm": {
            "mipro": {
                "num_instructions": args.num_candidates,
                "num_demo_sets": args.num_candidates,
                "num_trials": args.num_trials,
                "minibatch_size": args.minibatch_size,
                "full_eval_every": args.full_eval_every,
                "max_bootstrapped_demos": args.max_demos,
                "max_labeled_demos": args.max_demos,
                "proposer_max_tokens": args.proposer_max_tokens,
            }
        },
    }


async def run_emery(args: argparse.Namespace, base_url: str) -> dict[str, Any]:
    config = parse_config(emery_config(args, base_url))
    dataset = resolve_dataset(config)
    seed = Candidate(components={"solve": args.instruction})
    models = build_models(config, roles=("task", "proposer"))
    ctx = build_search_context(
        system=resolve_system(config),
        dataset=dataset,
        verifier=resolve_verifier(config, dataset),
        lms=models.by_role,
        budget=config.job.budget,
        meter=models.meter,
        seed=args.seed,
        seed_candidate=seed,
        concurrency=2,
    )
    started = time.perf_counter()
    outcome = await run_search(build_algorithm("mipro", config.algorithm["mipro"]), ctx)
    search_s = time.perf_counter() - started
    usage = models.meter.by_role()
    state = outcome.state
    assert isinstance(state, MiproState)
    best = ctx.candidates[state.best_candidate_id]
    test = await ctx.evaluations.evaluate(best, dataset.test, "test", charge=False)
    seed_test = await ctx.evaluations.evaluate(seed, dataset.test, "test", charge=False)
    return {
        "side": "emery mipro",
        "seed_test": seed_test.mean,
        "test": test.mean,
        "metric_calls": ctx.budget.usage.metric_calls,
        "lm": {
            role: {
                "calls": used.calls,
                "prompt_tokens": used.prompt_tokens,
                "completion_tokens": used.completion_tokens,
            }
            for role, used in usage.items()
        },
        "search_s": search_s,
        "instructions": [best.components["solve"]],
        "demos": len(best.demos.get("solve", ())),
    }


def run_dspy(args: argparse.Namespace, base_url: str, data: Path) -> dict[str, Any]:
    command = [
        str(BENCH_PYTHON),
        str(HERE / "mipro_dspy_peer.py"),
        "--data",
        str(data),
        "--base-url",
        base_url,
        "--instruction",
        args.instruction,
        "--module",
        args.dspy_module,
        "--task-max-tokens",
        str(args.task_max_tokens),
        "--proposer-max-tokens",
        str(args.proposer_max_tokens),
        "--num-candidates",
        str(args.num_candidates),
        "--num-trials",
        str(args.num_trials),
        "--minibatch-size",
        str(args.minibatch_size),
        "--full-eval-every",
        str(args.full_eval_every),
        "--max-demos",
        str(args.max_demos),
        "--seed",
        str(args.seed),
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.stderr.write(done.stderr[-4000:])
        raise RuntimeError(f"the DSPy side failed with exit code {done.returncode}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def totals(side: dict[str, Any]) -> tuple[int, int, int]:
    roles = side["lm"].values()
    return (
        sum(r["calls"] for r in roles),
        sum(r["prompt_tokens"] for r in roles),
        sum(r["completion_tokens"] for r in roles),
    )


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "n/a"


def report(emery: dict[str, Any], dspy: dict[str, Any], args: argparse.Namespace) -> None:
    print(f"\nmodel local/{args.model}; data: word_problems seed {args.seed}, ", end="")
    print(f"train {args.n_train} / val {args.n_val} / test {args.n_test}")
    header = f"{'':14} {'test':>6} {'seed':>6} {'metric':>7} {'LM calls':>9} "
    print(header + f"{'tok in':>9} {'tok out':>8} {'search s':>9}")
    rows = []
    for side in (emery, dspy):
        calls, prompt, completion = totals(side)
        rows.append((calls, prompt, completion))
        print(
            f"{side['side']:14} {side['test']:6.3f} {side['seed_test']:6.3f} "
            f"{side['metric_calls']:7d} {calls:9d} {prompt:9d} {completion:8d} "
            f"{side['search_s']:9.0f}"
        )
    (ec, ep, eo), (dc, dp, do) = rows
    print(
        f"{'emery/dspy':14} {ratio(emery['test'], dspy['test']):>6} {'':6} "
        f"{ratio(emery['metric_calls'], dspy['metric_calls']):>7} {ratio(ec, dc):>9} "
        f"{ratio(ep, dp):>9} {ratio(eo, do):>8} {ratio(emery['search_s'], dspy['search_s']):>9}"
    )
    for side in (emery, dspy):
        print(f"{side['side']} instruction: {json.dumps(side['instructions'])[:300]}")
        print(f"{side['side']} demos: {side['demos']}")
        if side.get("error"):
            print(f"{side['side']} FAILED (its seed program is scored instead): {side['error']}")


def main() -> None:
    args = arguments()
    if not BENCH_PYTHON.exists():
        sys.exit(f"missing {BENCH_PYTHON}: create it as the docstring of this script says")
    logging.getLogger("emery.evaluation.evaluator").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory(prefix="mipro-vs-dspy-") as tmp:
        folder = Path(tmp)
        data_config = parse_config(emery_config(args, "http://unused"))
        write_data(resolve_dataset(data_config), folder / "data.json")
        budget = dspy_metric_calls(args)
        print(f"matched metric-call budget: {budget} (DSPy's plan + one bootstrap pass)")
        with model_server(args, folder / "server.log") as base_url:
            emery = asyncio.run(run_emery(args, base_url))
            print("emery:", json.dumps(emery)[:400], flush=True)
            dspy = run_dspy(args, base_url, folder / "data.json")
            print("dspy:", json.dumps(dspy)[:400], flush=True)
    report(emery, dspy, args)


if __name__ == "__main__":
    main()
