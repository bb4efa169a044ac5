"""The ``gepa`` library (``gepa==0.1.4``) on a benchmark spec; runs in its own venv.

Usage (the harness does this): ``.bench-venvs/gepa/bin/python gepa_library.py SPEC OUT``.
SPEC is JSON written by ``common.peer_spec`` and ``gepa_vs_library.py``: the endpoint and
model, the seed instruction (placeholders filled), train and val rows, the job's parser and
verifier, the budget (metric calls; a wall-time cap when given, gepa's
``TimeoutStopCondition``) and GEPA's settings. Both LMs are called through the same
OpenAI-compatible endpoint as the emery row. A reply is scored as emery scores it
(``scoring.py``): the parser reads the output (else 0, with emery's feedback), then the
verifier compares it with the expected one. OUT gets the best instruction, its val score,
the metric calls, LM calls and tokens by role, and the wall time.

Only the standard library and gepa are imported (and ``scoring.py`` beside this file).
"""

from __future__ import annotations

import json
import sys
import time
import urllib.request
from typing import Any

import gepa
from gepa.adapters.default_adapter.default_adapter import DefaultAdapter, EvaluationResult
from gepa.utils.stop_condition import TimeoutStopCondition
from scoring import expected_text, parse, verify


class Scorer:
    """The job's parser, then its verifier, with emery's feedback (see ``scoring``)."""

    def __init__(
        self,
        parser: dict[str, Any],
        verifier: dict[str, Any],
        stage: str,
        fields: dict[str, dict[str, Any]],
    ) -> None:
        self.parser = parser
        self.verifier = verifier
        self.stage = stage
        self.fields = fields

    def __call__(self, data: dict[str, Any], response: str) -> EvaluationResult:
        try:
            output = parse(self.parser, response)
        except ValueError as exc:
            return EvaluationResult(
                score=0.0, feedback=f"The run failed: stage {self.stage!r}: {exc}"
            )
        own = self.fields.get(data["input"])
        value, feedback = verify(self.verifier, data["answer"], output, own)
        return EvaluationResult(score=value, feedback=feedback)


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
            "answer": expected_text(item["expected"]),
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

    field = spec["input_field"]
    fields = {
        str(row["input"][field]): row.get("fields") or {}
        for split in ("train", "val", "test")
        for row in spec[split]
    }
    scorer = Scorer(spec["parser"], spec["verifier"], spec["component"], fields)
    adapter = DefaultAdapter(model=task_lm, evaluator=scorer)
    wall_time_s = spec.get("wall_time_s")
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
        stop_callbacks=TimeoutStopCondition(wall_time_s) if wall_time_s else None,
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
        "stop_reason": "wall_time" if wall_time_s and wall >= wall_time_s else "metric_calls",
    }
    with open(sys.argv[2], "w") as handle:
        json.dump(out, handle, indent=2)


if __name__ == "__main__":
    main()
