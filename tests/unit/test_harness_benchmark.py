"""``benchmarks/harness/run.py`` with scripted models: test episodes counted by the stop
reason stored in their spans, and the proposal counts of GEPA and APO."""

from __future__ import annotations

import importlib.util
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

import pytest
from harness_support import CRASHING, calculator_lm

from emery.core.models import ChatMessage
from emery.lm import FakeLM

RUN = Path(__file__).resolve().parents[2] / "benchmarks" / "harness" / "run.py"


def load_benchmark() -> ModuleType:
    spec = importlib.util.spec_from_file_location("harness_benchmark", RUN)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def crashing_reflection(messages: Sequence[ChatMessage]) -> str:
    """Critiques briefly; every module it writes crashes."""
    if "do not write the module" in messages[-1]["content"]:
        return "Retry failed tools."
    return f"```python\n{CRASHING}```"


@pytest.mark.parametrize("algorithm", ["gepa", "apo"])
def test_counts_episodes_by_stored_stop_reason(
    algorithm: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR)
    bench = load_benchmark()
    # calculator episodes need three model calls: with two each ends by its budget
    args = bench.parser().parse_args(
        [
            *("--algorithm", algorithm, "--budget", "14", "--proposals", "2"),
            *("--n-val", "2", "--n-test", "3", "--max-llm-calls", "2", "--episode-timeout", "20"),
        ]
    )
    report = bench.search(
        "calculator", args, calculator_lm(), FakeLM(crashing_reflection, model="fake/crash")
    )
    assert report["state"] == "succeeded"
    budget_only = dict.fromkeys(bench.STOP_REASONS, 0) | {"budget": 3}
    assert report["baseline_stop_reasons"] == budget_only
    assert report["best_stop_reasons"] == budget_only
    assert report["best_changed_code"] is False
    assert report["rejected_by_smoke_run"] == 2
    assert report["proposals_compiled"] == 2
    assert report["proposals_invalid"] == 0
    assert report["accepted"] == 0
    assert report["baseline_test"]["n"] == 3


def test_defaults_are_one_small_environment() -> None:
    args = load_benchmark().parser().parse_args([])
    assert args.environments == ["calculator"]
    assert args.model == "local/qwen2.5-coder-0.5b"
    assert args.n_test <= 10
    assert args.budget <= 30
