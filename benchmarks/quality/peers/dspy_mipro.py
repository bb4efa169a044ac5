"""DSPy's MIPROv2 (``dspy==3.4.1`` with optuna) on a benchmark spec; runs in its own venv.

Usage (the harness does this): ``.bench-venvs/dspy/bin/python dspy_mipro.py SPEC OUT``.
SPEC is JSON written by ``benchmarks/quality/mipro_vs_dspy.py``: the endpoint and model,
the seed instruction (placeholders filled), train/val/test rows, the job's verifier and
MIPROv2's settings. Task and proposer model are the same endpoint, told apart by model
name (the server serves one model whatever the name) so that calls and tokens are counted
per role. The program is ``<input field> -> answer``; the metric is the job's verifier on
the ``answer`` field (``scoring.py``: numeric, normalized, exact or json_object, as emery
scores).

A DSPy program runs through DSPy's adapters, not emery's prompt format, so the winner is
scored on test here, by DSPy, with that metric (per row; a reply DSPy cannot parse scores
0, as in ``dspy.Evaluate``). OUT also gets the winning instruction and demos so the driver can
score them in emery's format too. A failure inside ``compile`` (a weak proposer can
break DSPy's output parsing) is reported, and the seed program is scored instead.

Only the standard library and dspy are imported (and ``scoring.py`` beside this file).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

import dspy
from dspy.clients.base_lm import GLOBAL_HISTORY
from scoring import expected_text, verify


def fraction(percent: float | None) -> float | None:
    """DSPy reports evaluation scores in percent; the harness wants 0..1."""
    return None if percent is None else percent / 100


class Metric:
    """The job's verifier on the ``answer`` field, counting every call (the metric-call budget).
    ``fields`` maps each example's input text to the example's own fields (what a verifier
    such as ``code_tests`` reads beside the answer)."""

    def __init__(
        self, verifier: dict[str, Any], field: str, fields: dict[str, dict[str, Any]]
    ) -> None:
        self.verifier = verifier
        self.field = field
        self.fields = fields
        self.calls = 0
        self._lock = threading.Lock()

    def score(self, example: Any, prediction: Any) -> float:
        answer = str(getattr(prediction, "answer", "") or "")
        own = self.fields.get(str(example[self.field]))
        return verify(self.verifier, example.answer, answer, own)[0]

    def __call__(self, example: Any, prediction: Any, trace: Any = None) -> float:
        with self._lock:
            self.calls += 1
        return self.score(example, prediction)


def test_scores(program: Any, rows: list[Any], metric: Metric, field: str) -> list[float]:
    """Each test row's score (uncounted); a reply DSPy cannot parse scores 0."""
    scores = []
    for example in rows:
        try:
            scores.append(metric.score(example, program(**{field: example[field]})))
        except Exception:  # an unparseable reply is a wrong answer
            scores.append(0.0)
    return scores


def usage(model: str) -> dict[str, int]:
    entries = [e for e in GLOBAL_HISTORY if e.get("model") == model]

    def total(key: str) -> int:
        return sum(int((e.get("usage") or {}).get(key) or 0) for e in entries)

    return {
        "calls": len(entries),
        "prompt_tokens": total("prompt_tokens"),
        "completion_tokens": total("completion_tokens"),
    }


def examples(rows: list[dict[str, Any]], field: str) -> list[Any]:
    return [
        dspy.Example(
            **{field: str(row["input"][field]), "answer": expected_text(row["expected"])}
        ).with_inputs(field)
        for row in rows
    ]


def main() -> None:
    with open(sys.argv[1]) as handle:
        spec = json.load(handle)
    field = spec["input_field"]
    train, val, test = (examples(spec[split], field) for split in ("train", "val", "test"))

    def lm(role: str, max_tokens: int) -> Any:
        # litellm sends max_completion_tokens, which llama.cpp servers ignore: repeat it.
        return dspy.LM(
            f"openai/{role}",
            api_base=spec["base_url"],
            api_key="unused",
            temperature=0.0,
            max_tokens=max_tokens,
            cache=False,
            extra_body={"max_tokens": max_tokens},
        )

    task_lm = lm("task", spec["task_max_tokens"])
    proposer_lm = lm("proposer", spec["proposer_max_tokens"])
    dspy.configure(lm=task_lm)
    signature = dspy.Signature(f"{field} -> answer", spec["seed_instruction"])
    module = dspy.ChainOfThought if spec["module"] == "cot" else dspy.Predict
    program = module(signature)
    fields = {
        str(row["input"][field]): row.get("fields") or {}
        for split in ("train", "val", "test")
        for row in spec[split]
    }
    metric = Metric(spec["verifier"], field, fields)
    optimizer = dspy.MIPROv2(
        metric=metric,
        prompt_model=proposer_lm,
        task_model=task_lm,
        auto=None,
        num_candidates=spec["num_candidates"],
        max_bootstrapped_demos=spec["max_demos"],
        max_labeled_demos=spec["max_demos"],
        num_threads=spec["threads"],
        seed=spec["seed"],
    )
    error = None
    started = time.perf_counter()
    try:
        optimized = optimizer.compile(
            program,
            trainset=train,
            valset=val,
            num_trials=spec["num_trials"],
            minibatch_size=spec["minibatch_size"],
            minibatch_full_eval_steps=spec["full_eval_every"],
        )
    except Exception as exc:
        error = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
        optimized = program
    wall = time.perf_counter() - started
    lm_usage = {"task": usage("openai/task"), "proposer": usage("openai/proposer")}
    predictor = optimized.predictors()[0]
    logs = getattr(optimized, "trial_logs", None) or {}
    full = [t.get("full_eval_score") for t in logs.values() if t.get("full_eval_score") is not None]
    out = {
        "instruction": predictor.signature.instructions,
        "demos": [
            {
                key: str(value)
                for key, value in dict(demo).items()
                if not key.startswith("augmented")
            }
            for demo in predictor.demos
        ],
        "baseline_val": fraction(full[0] if full else None),
        "best_val": fraction(getattr(optimized, "score", None)),
        "metric_calls": metric.calls,
        "lm": lm_usage,
        "wall_time_s": wall,
        "error": error,
        "best_test_dspy": test_scores(optimized, test, metric, field),
        "seed_test_dspy": test_scores(program, test, metric, field),
    }
    with open(sys.argv[2], "w") as handle:
        json.dump(out, handle, indent=2)


if __name__ == "__main__":
    main()
