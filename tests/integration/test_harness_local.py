"""The code harness on the real local model (SmolLM2, the fastest): the baseline loop runs
calculator episodes in episode processes, every model call and tool action recorded under
the rollout."""

from __future__ import annotations

import asyncio
import json
import random

import pytest

from emery.core.models import Example
from emery.evaluation import Evaluator
from emery.lm import LMConfig, UsageMeter, build_lm
from emery.systems.harness.envs.calculator import CalculatorEnv
from emery.systems.harness.system import CodeHarness, CodeHarnessConfig
from emery.tracing.recorder import MemoryRecorder
from emery.verifiers import build_verifier
from emery.verifiers.config import VerifierConfig

pytestmark = pytest.mark.integration


def calculator_examples(n: int) -> list[Example]:
    rng = random.Random(0)
    rows = [CalculatorEnv.generate(rng) for _ in range(n)]
    return [
        Example(id=f"calc-{i}", input=inputs, expected=gold)
        for i, (inputs, gold) in enumerate(rows)
    ]


def test_baseline_loop_runs_episodes_on_the_local_model() -> None:
    system = CodeHarness(CodeHarnessConfig(environment="calculator", max_llm_calls=4))
    lm = build_lm(
        LMConfig(model="local/smollm2-135m", max_tokens=96, n_ctx=2048, cache=False),
        role="task",
        meter=UsageMeter(),
        cache=None,
    )
    recorder = MemoryRecorder()
    evaluator = Evaluator(
        system, build_verifier(VerifierConfig(kind="numeric")), lm, recorder=recorder
    )

    result = asyncio.run(evaluator.evaluate(system.seed_candidate(), calculator_examples(2), "val"))

    assert len(result.results) == 2
    for example in result.results:
        spans = recorder.spans(example.rollout_id)
        chats = [s for s in spans if s.name.startswith("chat")]
        assert 1 <= len(chats) <= 4  # the model was called, within max_llm_calls
        notes = [
            json.loads(str(s.attributes["emery.annotation.json"]))
            for s in spans
            if s.name == "emery.annotation"
        ]
        reasons = [note["harness.stop_reason"] for note in notes if "harness.stop_reason" in note]
        assert len(reasons) == 1
        # a weak model's replies end an episode by its answer or its caps, never by a crash
        assert reasons[0] in {"answer", "budget", "timeout"}
        assert (example.error is None) == (reasons[0] == "answer")
