"""Metric functions as DSPy and gepa users write them, and ``openai`` clients as models, in
``emery.optimize`` and ``emery.Job.create``."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import openai
import pytest

import emery
from emery.core.errors import ConfigError
from emery.core.models import Example
from emery.jobs.manage import create_job
from emery.lm import FakeLM
from emery.lm.openai_compat import OpenAICompatibleLM
from emery.sdk.arguments import optimize_config
from emery.store import MemoryStore
from emery.store.records import EvaluationFilter
from emery.verifiers.base import Verdict
from emery.verifiers.function import FunctionMetric, MetricError, MetricExample

ANSWERS = {"q1": "a1", "q2": "a2", "q3": "nope", "q4": "a4"}
EXAMPLES = [Example(id=f"e{n}", input={"question": f"q{n}"}, expected=f"a{n}") for n in range(1, 5)]
PROGRAM = {
    "kind": "prompt_program",
    "stages": [{"name": "solve", "messages": [{"template": "{question}"}]}],
}


def answer_lm() -> FakeLM:
    """Right on e1, e2 and e4, wrong on e3."""
    return FakeLM(lambda messages: ANSWERS[messages[-1]["content"]], model="fake/metric")


def scores(store: MemoryStore, job_id: str) -> dict[str, tuple[float, str]]:
    """Example id → (score, feedback) of the job's val evaluations."""
    page = store.list_evaluations(EvaluationFilter(job_id=job_id, split="val"))
    return {e.result.example_id: (e.result.score, e.result.feedback) for e in page.items}


def optimize(tmp_path: Path, verifier: Any, store: MemoryStore) -> emery.JobResult:
    return emery.optimize(
        PROGRAM,
        EXAMPLES,
        algorithm="baseline",
        verifier=verifier,
        lm=answer_lm(),
        store=store,
        runtime={"workdir": str(tmp_path / ".emery")},
        progress=False,
        env_file=False,
    )


def test_a_plain_example_output_function(tmp_path: Path) -> None:
    def metric(example: Any, output: Any) -> bool:
        return bool(example.answer == output)  # a scalar gold output answers to `answer`

    store = MemoryStore()
    result = optimize(tmp_path, metric, store)
    assert result.state == "succeeded"
    assert result.baseline_val == 0.75
    assert {key: score for key, (score, _) in scores(store, result.job_id).items()} == {
        "e1": 1.0,
        "e2": 1.0,
        "e3": 0.0,
        "e4": 1.0,
    }
    assert store.get_job(result.job_id).metadata["in_process_inputs"] == ["verifier", "lms"]


def test_a_dspy_metric_with_score_and_feedback(tmp_path: Path) -> None:
    traces: list[Any] = []

    def metric(example: Any, pred: Any, trace: Any = None) -> tuple[float, str]:
        traces.append(trace)
        if pred == example.answer:
            return 1.0, "right"
        return 0.0, f"expected {example['answer']}, got {pred}"

    store = MemoryStore()
    result = optimize(tmp_path, metric, store)
    assert result.baseline_val == 0.75
    got = scores(store, result.job_id)
    assert got["e1"] == (1.0, "right")
    assert got["e3"] == (0.0, "expected a3, got nope")
    assert traces
    assert all(trace is None for trace in traces)  # DSPy's evaluation mode


def test_an_async_metric_returning_a_prediction_in_job_create(tmp_path: Path) -> None:
    async def metric(gold: Any, pred: Any, trace: Any = None, pred_name: Any = None) -> Any:
        await asyncio.sleep(0)
        right = pred == gold.expected
        return SimpleNamespace(score=0.5 if right else 0.25, feedback="half" if right else "low")

    store = MemoryStore()
    config = {
        "job": {"algorithm": "baseline"},
        "system": PROGRAM,
        "dataset": {"path": str(tmp_path / "rows.jsonl")},
        "runtime": {"workdir": str(tmp_path / ".emery")},
        "lm": {"task": {"model": "python/test_sdk_metric_functions:answer_lm"}},
    }
    rows = [{"id": e.id, "question": e.input["question"], "expected": e.expected} for e in EXAMPLES]
    (tmp_path / "rows.jsonl").write_text(
        "".join(json.dumps({**row, "split": "val"}) + "\n" for row in rows)
    )
    job = emery.Job.create(config, store=store, verifier=metric, env_file=False)
    assert job.stream_until_complete().state == "succeeded"
    got = scores(store, job.id)
    assert got["e1"] == (0.5, "half")
    assert got["e3"] == (0.25, "low")


def test_a_metric_that_raises_scores_that_example_0(
    tmp_path: Path, quiet_evaluator_failures: None
) -> None:
    def metric(example: Any, output: Any) -> float:
        if example.id == "e2":
            raise KeyError("no such label")
        return 1.0 if output == example.answer else 0.0

    store = MemoryStore()
    result = optimize(tmp_path, metric, store)
    assert result.state == "succeeded"
    assert result.baseline_val == 0.5
    score, feedback = scores(store, result.job_id)["e2"]
    assert score == 0.0
    assert feedback == "The run failed: MetricError: the metric metric() raised KeyError:" + (
        " 'no such label'"
    )


def verdict(metric: Any, example: Example, output: Any) -> Verdict:
    return asyncio.run(FunctionMetric(metric).verify(example, output))


def test_what_a_metric_may_return() -> None:
    example = EXAMPLES[0]
    assert verdict(lambda e, o: True, example, "x") == Verdict(score=1.0)
    assert verdict(lambda e, o: 0.25, example, "x").score == 0.25
    assert verdict(lambda e, o: (1, None), example, "x") == Verdict(score=1.0)
    assert verdict(lambda e, o: {"score": 0.5, "feedback": "ok"}, example, "x").feedback == "ok"
    assert verdict(lambda e, o: SimpleNamespace(score=0.0), example, "x") == Verdict(score=0.0)
    for bad, message in [
        (1.5, "returned the score 1.5 for example e1; a score must be in"),
        (float("nan"), "returned the score nan"),
        ("0.5", "returned '0.5' for example e1; return a score in"),
        (None, "returned None"),
        (("high", "x"), "returned the score 'high'"),
    ]:
        with pytest.raises(MetricError, match=message.replace("(", r"\(")):
            verdict(lambda e, o, bad=bad: bad, example, "x")


def test_a_required_third_parameter_gets_the_run(tmp_path: Path) -> None:
    seen: list[Any] = []

    def metric(example: Any, output: Any, trace: Any) -> float:
        seen.append(trace)
        return 1.0

    asyncio.run(FunctionMetric(metric).verify(EXAMPLES[0], "x", "the run"))
    assert seen == ["the run"]
    for wrong in (lambda e: 1.0, lambda e, o, t, x: 1.0):
        with pytest.raises(ConfigError, match=r"cannot be called as metric\(example, output\)"):
            FunctionMetric(wrong)
    with pytest.raises(ValueError, match="give a verifier kind"):
        optimize(tmp_path, 42, MemoryStore())


def test_what_the_metric_example_holds() -> None:
    example = Example(
        id="x",
        input={"question": "q", "context": "c"},
        expected={"answer": "a", "reason": "r"},
        meta={"source": "s"},
    )
    seen = MetricExample(example)
    assert (seen.id, seen.input, seen.expected, seen.meta) == (
        "x",
        example.input,
        example.expected,
        example.meta,
    )
    assert (seen.question, seen.answer, seen.reason, seen.source) == ("q", "a", "r", "s")
    assert seen["context"] == "c"
    assert seen.get("missing", 0) == 0
    assert "answer" in seen
    assert seen.example is example
    with pytest.raises(AttributeError, match="example x has no field 'label'; it has id"):
        _ = seen.label  # a dict gold output answers only to its own keys
    scalar = MetricExample(Example(id="y", input={"q": 1}, expected=3))
    assert scalar.answer == scalar.label == scalar.gold == 3
    with pytest.raises(AttributeError, match="has no field 'answer' and no gold output"):
        _ = MetricExample(Example(id="z", input={"q": 1})).answer


def test_a_dict_output_reads_as_attributes() -> None:
    def metric(example: Any, pred: Any) -> float:
        assert pred == {"answer": "a1"}  # still a dict
        return float(pred.answer == example.answer)

    assert verdict(metric, EXAMPLES[0], {"answer": "a1"}).score == 1.0
    with pytest.raises(MetricError, match="the output has no field 'rationale'; it has answer"):
        verdict(lambda e, pred: pred.rationale, EXAMPLES[0], {"answer": "a1"})


# --- openai clients as models --------------------------------------------------------------


def test_an_openai_client_with_its_model(tmp_path: Path) -> None:
    secret = "sk-test-never-stored-0123"
    client = openai.AsyncOpenAI(base_url="http://127.0.0.1:9/v1", api_key=secret)
    reflector = openai.OpenAI(base_url="http://127.0.0.1:8/v1", api_key=secret)
    config, given, inputs = optimize_config(
        system=PROGRAM,
        dataset=EXAMPLES,
        algorithm="baseline",
        budget=None,
        verifier="exact",
        lm={"client": client, "model": "gpt-4.1-mini", "temperature": 0.5},
        reflection_lm={"client": reflector, "model": "openai/big"},
        seed=0,
        settings=None,
        runtime=None,
        name=None,
        workdir=tmp_path,
    )
    assert inputs.lms is not None
    task = inputs.lms["task"]
    assert isinstance(task, OpenAICompatibleLM)
    assert (task.model, task.base_url) == ("gpt-4.1-mini", "http://127.0.0.1:9/v1/")
    assert inputs.lms["reflection"] is inputs.lms["proposer"]
    assert inputs.lms["reflection"].model == "big"
    assert given["lm"]["task"] == {
        "model": "openai/gpt-4.1-mini",
        "base_url": "http://127.0.0.1:9/v1",
        "temperature": 0.5,
    }
    store = MemoryStore()
    record = create_job(store, config, given=given, inputs=inputs)
    stored = store.get_job(record.id)
    assert secret not in json.dumps([stored.config, stored.resolved_config, stored.metadata])
    assert stored.metadata["in_process_inputs"] == ["lms"]


def test_a_bare_client_is_refused_in_one_line(tmp_path: Path) -> None:
    client = openai.AsyncOpenAI(base_url="http://127.0.0.1:9/v1", api_key="k")
    for lm, message in [
        (client, r"lm: pass an OpenAI client with its model name: lm=\{'client'"),
        ({"client": client}, "lm: give the client's model name too"),
        ({"client": client, "model": "m", "api_key": "x"}, "lm: api_key comes from the client"),
        ({"client": "c", "model": "m"}, "'client' must be an openai.OpenAI or openai.Async"),
    ]:
        with pytest.raises(ValueError, match=message) as info:
            emery.optimize(
                PROGRAM, EXAMPLES, lm=lm, store=MemoryStore(), progress=False, env_file=False
            )
        assert "\n" not in str(info.value)
