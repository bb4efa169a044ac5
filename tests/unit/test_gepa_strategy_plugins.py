"""GEPA's strategies are plug-ins like its parent selector: the minibatch sampler, the
merge policy, the edit operators and the acceptance rule each take a built-in name, a
``"module:attr"`` of your own or an entry point. A GEPA run with one of this module's
uses it (each records what it did), and an unknown name is a one-line error that lists
the known ones."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from test_gepa_support import reflection_lm, task_lm, word_problems

import emery
from emery.algorithms.gepa import Gepa
from emery.algorithms.gepa.settings import GepaSettings
from emery.core.errors import ConfigError
from emery.data.tasks import builtin_task
from emery.plugin import GepaState, MinibatchSampler, SamplerKind
from emery.store import MemoryStore
from emery.systems.prompt_program import PromptProgram

pytestmark = pytest.mark.usefixtures("quiet_evaluator_failures")

DRAWN: list[list[str]] = []


class FirstFew:
    """Always the first ``size`` train examples (GEPA's own shuffles them)."""

    def draw(
        self, state: GepaState, train_ids: list[str], size: int, rng: random.Random
    ) -> list[str]:
        DRAWN.append(train_ids[:size])
        return train_ids[:size]


FIRST_FEW = SamplerKind("first_few", lambda settings: FirstFew())


def run_gepa(tmp_path: Path, store: MemoryStore, **settings: Any) -> emery.JobResult:
    """A short GEPA run of the word problems (scripted models) with ``settings``."""
    dataset = word_problems()
    result = emery.optimize(
        PromptProgram(builtin_task("word_problems").program),
        dataset,
        algorithm="gepa",
        budget=200,
        verifier="numeric",
        lm=task_lm(dataset),
        reflection_lm=reflection_lm(),
        settings=settings,
        runtime={"workdir": str(tmp_path / ".emery")},
        store=store,
    )
    assert result.state == "succeeded", result.error
    return result


def test_first_few_is_a_minibatch_sampler() -> None:
    assert isinstance(FirstFew(), MinibatchSampler)


def test_a_gepa_run_draws_its_minibatches_with_a_sampler_of_ones_own(tmp_path: Path) -> None:
    DRAWN.clear()
    store = MemoryStore()
    result = run_gepa(tmp_path, store, minibatch_sampler=f"{__name__}:FIRST_FEW")
    sampled = store.list_events(result.job_id, kinds=["gepa.minibatch_sampled"])
    train = [example.id for example in word_problems().train]
    assert sampled
    assert all(event.data["example_ids"] == train[:3] for event in sampled)
    assert len(DRAWN) >= len(sampled)


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("minibatch_sampler", "algorithm.gepa.minibatch_sampler: unknown minibatch sampler"),
    ],
)
def test_an_unknown_strategy_is_one_line(setting: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        Gepa(GepaSettings(**{setting: "nope"}))
    assert str(info.value).startswith(f"{message} 'nope'; known ")
    assert "(or name one as 'module:attr')" in str(info.value)
    assert "\n" not in str(info.value)
