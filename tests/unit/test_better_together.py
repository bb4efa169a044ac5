"""``benchmarks/training/better_together.py`` chains its stages as the recipe in
docs/training.md says: every stage on the same data, stage 2 on stage 1's job, stage 3 a
search on stage 2's tuned model warm-started from stage 1, and a verdict that holds only
when stage 3 beats both."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from emery.config.schema import JobConfig

TRAINING = Path(__file__).resolve().parents[2] / "benchmarks" / "training"


@pytest.fixture(scope="module")
def bt() -> Iterator[ModuleType]:
    """The benchmark module, imported with its folder on the path (its ``run`` and
    ``configs`` are taken off again: other benchmark folders have modules of those names)."""
    sys.path.insert(0, str(TRAINING))
    try:
        yield importlib.import_module("better_together")
    finally:
        sys.path.remove(str(TRAINING))
        for name in ("better_together", "run", "configs"):
            sys.modules.pop(name, None)


ARGS = (
    "--model local/smollm2-135m --dataset word_problems --n-train 4 --n-val 2 --n-test 3"
    " --metric-calls 10 --max-tokens 64 --threads 1"
)


def test_the_stages_share_the_data_and_chain_through_job_ids(
    bt: ModuleType, tmp_path: Path
) -> None:
    from configs import base_config, sft_config

    args = bt.parse_args(ARGS.split())
    base = bt.with_threads(base_config(args, tmp_path), args)
    first = JobConfig.model_validate(bt.search_config(base, args, "s1"))
    second = JobConfig.model_validate(sft_config(base, args, "j-first", 2))
    tuned = "local/smollm2-135m+j-second"
    third = JobConfig.model_validate(
        bt.search_config(bt.on_tuned_model(base, tuned), args, "s3", warm_start="j-first")
    )
    assert first.dataset == second.dataset == third.dataset
    assert second.sft is not None
    assert (second.sft.source_job, second.sft.candidate) == ("j-first", "best")
    assert third.job.warm_start == "j-first"
    assert (first.job.algorithm, third.job.algorithm) == ("mipro", "mipro")
    assert third.lm.task.model == tuned
    for role in ("proposer", "reflection"):
        assert third.lm.for_role(role).model == first.lm.task.model == "local/smollm2-135m"
    for config in (first, second, third):
        assert config.lm.task.n_threads == 1
        assert config.lm.task.max_tokens == 64


def _row(stage: str, mean: float, low: float, high: float) -> dict[str, object]:
    test = {"mean": mean, "low": low, "high": high, "n": 30}
    return {"stage": stage, "test": test}


def test_better_together_holds_only_when_stage_3_beats_both(bt: ModuleType) -> None:
    first = _row("1 prompt search", 0.2, 0.1, 0.35)
    second = _row("2 SFT (3 steps, 9 chats)", 0.3, 0.17, 0.47)
    better = bt.verdict([first, second, _row("3 prompt search, tuned model", 0.6, 0.42, 0.75)])
    assert better.endswith("held")
    assert "+40.0 points vs stage 1 (prompt alone) (intervals apart)" in better
    assert "+30.0 points vs stage 2 (weights) (intervals overlap)" in better
    worse = bt.verdict([first, second, _row("3 prompt search, tuned model", 0.25, 0.1, 0.4)])
    assert worse.endswith("did not hold")
    assert bt.verdict([first]).endswith("not measured (a stage did not finish)")


def test_sft_samples_flags_set_the_sampling_of_stage_2(bt: ModuleType, tmp_path: Path) -> None:
    from configs import base_config, sft_config

    flags = " --sft-samples 3 --sft-teacher local/qwen2.5-coder-0.5b --sft-splits train"
    args = bt.parse_args((ARGS + flags).split())
    chats, steps = bt.sft_plan(tmp_path, "j-first", args)
    assert chats is None  # known only once the job has sampled
    assert steps == 8  # 3 epochs over at most 3 x 4 train chats less the 10% held out, 4 a batch
    data = sft_config(bt.with_threads(base_config(args, tmp_path), args), args, "j-first", steps)
    data["sft"] |= bt.sampling_settings(args)
    sft = JobConfig.model_validate(data).sft
    assert sft is not None
    assert (sft.samples_per_example, sft.sample_temperature) == (3, 0.7)
    assert sft.teacher == "local/qwen2.5-coder-0.5b"
    assert bt.sampling_settings(bt.parse_args(ARGS.split())) == {}
    sampled = {
        "model": "local/qwen2.5-coder-0.5b",
        "samples_per_example": 3,
        "temperature": 0.7,
        "kept": 5,
        "examples_kept": 3,
        "examples": 4,
        "stored": 1,
    }
    result = {
        "model": "local/smollm2-135m+j-2",
        "training": {"train_examples": 6, "sampled": sampled},
    }
    row = bt.sft_row({"payload": {"result": result, "job_id": "j-2"}, "wall_s": 1.0}, steps, None)
    assert row["stage"] == (
        "2 SFT (8 steps, 6 chats: 5 sampled by qwen2.5-coder-0.5b, 3x at T=0.7, from 3 of 4"
        " examples, + 1 stored)"
    )
