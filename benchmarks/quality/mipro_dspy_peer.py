"""The DSPy side of ``mipro_vs_dspy.py``: DSPy's MIPROv2 on the same data and endpoint.

Runs in the benchmark's own virtual environment (``.bench-venvs/dspy``, see
``mipro_vs_dspy.py``), never in emery's. Reads the data file the driver wrote, optimizes
``ChainOfThought("question -> answer")`` (or ``Predict``) whose seed instruction is the
same as emery's, scores the result on test and prints one JSON line with the test
accuracy, metric calls, LM calls, tokens and wall time.
"""

from __future__ import annotations

import argparse
import json
import re
import threading
import time
from typing import Any

import dspy
from dspy.clients.base_lm import GLOBAL_HISTORY

_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


class CountingMetric:
    """Numeric match on the ``answer`` field, counting every call (the metric-call budget)."""

    def __init__(self) -> None:
        self.calls = 0
        self._lock = threading.Lock()

    def __call__(self, example: Any, prediction: Any, trace: Any = None) -> float:
        with self._lock:
            self.calls += 1
        return score(example, prediction)


def score(example: Any, prediction: Any) -> float:
    found = _NUMBER.findall(str(getattr(prediction, "answer", "") or ""))
    if not found:
        return 0.0
    try:
        return float(abs(float(found[-1].replace(",", "")) - float(example.answer)) < 1e-6)
    except ValueError:
        return 0.0


def accuracy(program: Any, rows: list[dspy.Example]) -> float:
    """Mean score; a reply DSPy cannot parse scores 0, as in ``dspy.Evaluate``."""
    total = 0.0
    for example in rows:
        try:
            total += score(example, program(question=example.question))
        except Exception:  # an unparseable reply is a wrong answer
            continue
    return total / len(rows)


def usage(model: str) -> dict[str, int]:
    """LM calls and tokens DSPy recorded for one model name."""
    entries = [e for e in GLOBAL_HISTORY if e.get("model") == model]
    return {
        "calls": len(entries),
        "prompt_tokens": sum(
            int((e.get("usage") or {}).get("prompt_tokens") or 0) for e in entries
        ),
        "completion_tokens": sum(
            int((e.get("usage") or {}).get("completion_tokens") or 0) for e in entries
        ),
    }


def examples(rows: list[dict[str, Any]]) -> list[dspy.Example]:
    return [
        dspy.Example(question=row["question"], answer=str(row["answer"])).with_inputs("question")
        for row in rows
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--instruction", default="Answer the question.")
    parser.add_argument("--module", choices=["cot", "predict"], default="cot")
    parser.add_argument("--task-max-tokens", type=int, default=200)
    parser.add_argument("--proposer-max-tokens", type=int, default=300)
    parser.add_argument("--num-candidates", type=int, required=True)
    parser.add_argument("--num-trials", type=int, required=True)
    parser.add_argument("--minibatch-size", type=int, required=True)
    parser.add_argument("--full-eval-every", type=int, required=True)
    parser.add_argument("--max-demos", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    with open(args.data, encoding="utf-8") as handle:
        data = json.load(handle)
    train, val, test = (examples(data[split]) for split in ("train", "val", "test"))

    def lm(name: str, max_tokens: int) -> dspy.LM:
        # litellm sends max_completion_tokens, which llama_cpp.server ignores: repeat it here.
        return dspy.LM(
            f"openai/{name}",
            api_base=args.base_url,
            api_key="local",
            temperature=0.0,
            max_tokens=max_tokens,
            cache=False,
            extra_body={"max_tokens": max_tokens},
        )

    task_lm = lm("task", args.task_max_tokens)
    prompt_lm = lm("proposer", args.proposer_max_tokens)
    dspy.configure(lm=task_lm)
    signature = dspy.Signature("question -> answer", args.instruction)
    program = dspy.ChainOfThought(signature) if args.module == "cot" else dspy.Predict(signature)
    metric = CountingMetric()
    optimizer = dspy.MIPROv2(
        metric=metric,
        prompt_model=prompt_lm,
        task_model=task_lm,
        auto=None,
        num_candidates=args.num_candidates,
        max_bootstrapped_demos=args.max_demos,
        max_labeled_demos=args.max_demos,
        num_threads=args.threads,
        seed=args.seed,
    )
    started = time.perf_counter()
    error = None
    try:
        optimized = optimizer.compile(
            program,
            trainset=train,
            valset=val,
            num_trials=args.num_trials,
            minibatch_size=args.minibatch_size,
            minibatch_full_eval_steps=args.full_eval_every,
        )
    except Exception as exc:  # a weak proposer can break DSPy's output parsing: report it
        error = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
        optimized = program
    search_s = time.perf_counter() - started
    search_usage = {"task": usage("openai/task"), "proposer": usage("openai/proposer")}
    test_score = accuracy(optimized, test)
    seed_test = accuracy(program, test)
    instructions = [p.signature.instructions for p in optimized.predictors()]
    demos = sum(len(p.demos) for p in optimized.predictors())
    print(
        json.dumps(
            {
                "side": "dspy.MIPROv2",
                "best_val": getattr(optimized, "score", None),
                "seed_test": seed_test,
                "test": test_score,
                "metric_calls": metric.calls,
                "lm": search_usage,
                "search_s": search_s,
                "instructions": instructions,
                "demos": demos,
                "error": error,
            }
        )
    )


if __name__ == "__main__":
    main()
