"""gepa 0.1.4 on the mock endpoint's task, for ``run.py --peer gepa``; runs in gepa's venv.

Usage (``run.py`` does this): ``.bench-venvs/gepa/bin/python gepa_peer.py SPEC OUT``.

SPEC is the JSON ``run.py`` writes: the endpoint, the task and reflection models
(``mock-task``, ``mock-proposer``), the seed instruction, train and val rows, emery's parser
and verifier (scored as emery scores them, ``quality/peers/scoring.py``), the metric-call
budget, the seed, GEPA's minibatch size and merge settings (emery's GEPA defaults) and
``proposals``: 1 runs gepa's default ``SingleMutationSampling`` (one parent, one mutation
per iteration); n > 1 runs ``IndependentSampling(n)`` (n parents, each with its own
minibatch, per iteration: gepa 0.1.4's parallel proposals) with ``AllImprovements``.

Concurrency is what gepa gets with a litellm model: its default adapter sends one
(candidate, minibatch) batch at a time with ``max_workers`` requests at once
(``litellm.batch_completion``), and ``StatelessReflectionLM`` sends an iteration's
reflections as one batch when the LM has ``batch_complete``. Here the same is done with
threads (``concurrency`` at once, emery's per-batch limit), since the mock is not a litellm
provider. gepa's engine evaluates an iteration's (candidate, minibatch) pairs one after
the other (``default_batch_evaluate``; the default adapter has no ``batch_evaluate``);
with ``batch_evaluate`` in the spec the adapter gets that hook and evaluates them at once.

OUT gets the best instruction, val scores, metric calls, LM calls by role, wall time.
"""

from __future__ import annotations

import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "quality" / "peers"))

import gepa
from gepa.adapters.default_adapter.default_adapter import DefaultAdapter
from gepa.strategies.proposal_sampling import IndependentSampling, SingleMutationSampling
from gepa_library import Endpoint, Scorer, rows


class ThreadedModel:
    """A chat callable with ``batch_complete``: requests at once, as litellm's batch."""

    def __init__(self, endpoint: Endpoint, role: str, max_tokens: int, workers: int) -> None:
        self.endpoint = endpoint
        self.role = role
        self.max_tokens = max_tokens
        self.pool = ThreadPoolExecutor(max_workers=workers)

    def __call__(self, prompt: Any) -> str:
        messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
        return self.endpoint.chat(self.role, list(messages), self.max_tokens)

    def batch_complete(self, messages_list: list[list[dict[str, Any]]], **_: Any) -> list[str]:
        return list(self.pool.map(self, messages_list))


class ThreadedAdapter(DefaultAdapter):
    """gepa's default adapter, each batch's task calls sent ``workers`` at once."""

    def __init__(self, model: ThreadedModel, evaluator: Scorer, workers: int) -> None:
        super().__init__(model=model, evaluator=evaluator)
        self.threaded = model
        self.workers = workers

    def evaluate(self, batch: Any, candidate: Any, capture_traces: bool = False) -> Any:
        system = next(iter(candidate.values()))
        requests = [
            [{"role": "system", "content": system}, {"role": "user", "content": f"{d['input']}"}]
            for d in batch
        ]
        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            replies = list(pool.map(self.threaded, requests))
        answers = iter(replies)
        scorer = DefaultAdapter(model=lambda _messages: next(answers), evaluator=self.evaluator)
        return scorer.evaluate(batch, candidate, capture_traces)


class BatchThreadedAdapter(ThreadedAdapter):
    """``ThreadedAdapter`` with gepa's ``batch_evaluate`` hook: an iteration's (candidate,
    batch) pairs evaluated at once, each ``workers`` calls at a time (as emery's
    ``--concurrency`` is per batch)."""

    def batch_evaluate(self, items: list[tuple[Any, list[Any]]]) -> list[Any]:
        with ThreadPoolExecutor(max_workers=max(1, len(items))) as pool:
            return list(pool.map(lambda item: self.evaluate(item[1], item[0], True), items))


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    workers = spec["concurrency"]
    task = ThreadedModel(
        Endpoint(spec["base_url"], spec["model"]), "task", spec["task_max_tokens"], workers
    )
    reflection_endpoint = Endpoint(spec["base_url"], spec["reflection_model"])
    reflection = ThreadedModel(
        reflection_endpoint, "reflection", spec["reflection_max_tokens"], workers
    )
    kind = BatchThreadedAdapter if spec.get("batch_evaluate") else ThreadedAdapter
    scorer = Scorer(spec["parser"], spec["verifier"], spec["component"], {})  # no per-row fields
    adapter = kind(task, scorer, workers)
    n = spec["proposals"]
    sampling = SingleMutationSampling() if n == 1 else IndependentSampling(n)
    started = time.perf_counter()
    result = gepa.optimize(
        seed_candidate={spec["component"]: spec["seed_instruction"]},
        trainset=rows(spec["train"], spec["input_field"]),
        valset=rows(spec["val"], spec["input_field"]),
        adapter=adapter,
        reflection_lm=reflection,
        candidate_selection_strategy="pareto",
        reflection_minibatch_size=spec["minibatch_size"],
        use_merge=spec["use_merge"],
        max_merge_invocations=spec["max_merges"],
        max_metric_calls=spec["metric_calls"],
        seed=spec["seed"],
        display_progress_bar=False,
        raise_on_exception=False,
        run_dir=spec["workdir"] + "/gepa-run",
        sampling_strategy=sampling,
    )
    wall = time.perf_counter() - started
    best = result.best_candidate
    assert isinstance(best, dict)
    usage = task.endpoint.usage | reflection_endpoint.usage
    out = {
        "best_instruction": best[spec["component"]],
        "baseline_val": result.val_aggregate_scores[0],
        "best_val": result.val_aggregate_scores[result.best_idx],
        "metric_calls": result.total_metric_calls,
        "candidates": len(result.candidates),
        "full_val_evals": result.num_full_val_evals,
        "lm": usage,
        "wall_time_s": wall,
    }
    Path(sys.argv[2]).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
