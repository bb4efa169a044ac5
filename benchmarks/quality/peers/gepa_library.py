"""The ``gepa`` library (``gepa==0.1.4``) on a benchmark spec; runs in its own venv.

Usage (the harness does this): ``.bench-venvs/gepa/bin/python gepa_library.py SPEC OUT``.
SPEC is JSON written by ``benchmarks/quality/common.py``: the endpoint and model, the
seed instruction, train and val rows, the answer pattern of the task's parser, the budget
and GEPA's settings. Both LMs are called through the same OpenAI-compatible endpoint as
the emery row. The score mirrors emery's word-problems scoring: the reply must match the
pattern (else 0, with the same feedback emery gives), then its last number is compared
with the expected one. OUT gets the best instruction, its val score, the metric calls, LM
calls and tokens by role, and the wall time.

Only the standard library and gepa are imported: this venv has nothing else.
"""

from __future__ import annotations

import json
import math
import re
import sys
import time
import urllib.request
from typing import Any

import gepa
from gepa.adapters.default_adapter.default_adapter import DefaultAdapter, EvaluationResult

NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?|-?\.\d+")


def clip(text: str, limit: int = 120) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def last_number(text: str) -> float | None:
    for token in reversed(NUMBER.findall(text)):
        try:
            return float(token.replace(",", ""))
        except ValueError:
            continue
    return None


def number_text(value: float) -> str:
    return str(int(value)) if value.is_integer() else f"{value:g}"


class Scorer:
    """The task's parser (a regex) followed by a numeric comparison, as in emery."""

    def __init__(self, pattern: str, stage: str) -> None:
        self.pattern = pattern
        self.stage = stage

    def __call__(self, data: dict[str, Any], response: str) -> EvaluationResult:
        found = list(re.finditer(self.pattern, response, re.IGNORECASE | re.DOTALL))
        if not found:
            return EvaluationResult(
                score=0.0,
                feedback=(
                    f"The run failed: stage {self.stage!r}: the reply must match the pattern"
                    f" {self.pattern!r} but was {clip(response)!r}"
                ),
            )
        last = found[-1]
        output = (last.group(1) if last.groups() else last.group(0)).strip()
        want = float(data["answer"])
        got = last_number(output)
        if got is None:
            return EvaluationResult(
                score=0.0,
                feedback=f"Expected the number {number_text(want)} but the output has none.",
            )
        if math.isclose(got, want, abs_tol=1e-6):
            return EvaluationResult(score=1.0, feedback=f"Correct: {number_text(want)}.")
        return EvaluationResult(
            score=0.0,
            feedback=(
                f"Expected {number_text(want)} but the output's final number was"
                f" {number_text(got)} in {clip(output)!r}."
            ),
        )


class Endpoint:
    """Chat completions over HTTP, counting calls and tokens per role."""

    def __init__(self, base_url: str, model: str) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.usage: dict[str, dict[str, int]] = {}

    def chat(self, role: str, messages: list[dict[str, Any]], max_tokens: int) -> str:
        body = {
            "model": self.model,
            "messages": messages,
            "max_tokens": max_tokens,
            "temperature": 0.0,
        }
        request = urllib.request.Request(
            f"{self.base_url}/chat/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json", "Authorization": "Bearer unused"},
        )
        with urllib.request.urlopen(request, timeout=900) as response:
            reply = json.load(response)
        usage = reply.get("usage") or {}
        totals = self.usage.setdefault(
            role, {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0}
        )
        totals["calls"] += 1
        totals["prompt_tokens"] += int(usage.get("prompt_tokens", 0))
        totals["completion_tokens"] += int(usage.get("completion_tokens", 0))
        return str(reply["choices"][0]["message"].get("content") or "")


def rows(items: list[dict[str, Any]], field: str) -> list[dict[str, Any]]:
    return [
        {
            "input": str(item["input"][field]),
            "additional_context": {},
            "answer": str(item["expected"]),
        }
        for item in items
    ]


def main() -> None:
    with open(sys.argv[1]) as handle:
        spec = json.load(handle)
    endpoint = Endpoint(spec["base_url"], spec["model"])

    def task_lm(messages: Any) -> str:
        return endpoint.chat("task", list(messages), spec["task_max_tokens"])

    def reflection_lm(prompt: Any) -> str:
        messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
        return endpoint.chat("reflection", list(messages), spec["reflection_max_tokens"])

    adapter = DefaultAdapter(model=task_lm, evaluator=Scorer(spec["pattern"], spec["component"]))
    started = time.perf_counter()
    result = gepa.optimize(
        seed_candidate={spec["component"]: spec["seed_instruction"]},
        trainset=rows(spec["train"], spec["input_field"]),
        valset=rows(spec["val"], spec["input_field"]),
        adapter=adapter,
        reflection_lm=reflection_lm,
        candidate_selection_strategy="pareto",
        reflection_minibatch_size=spec["minibatch_size"],
        use_merge=spec["use_merge"],
        max_metric_calls=spec["metric_calls"],
        seed=spec["seed"],
        display_progress_bar=False,
        raise_on_exception=False,
        run_dir=spec["workdir"] + "/gepa-run",
    )
    wall = time.perf_counter() - started
    best = result.best_candidate
    assert isinstance(best, dict)
    out = {
        "best_components": best,
        "baseline_val": result.val_aggregate_scores[0],
        "best_val": result.val_aggregate_scores[result.best_idx],
        "metric_calls": result.total_metric_calls,
        "candidates": len(result.candidates),
        "lm": endpoint.usage,
        "wall_time_s": wall,
    }
    with open(sys.argv[2], "w") as handle:
        json.dump(out, handle, indent=2)


if __name__ == "__main__":
    main()
