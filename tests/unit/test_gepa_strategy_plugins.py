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
from test_gepa_merge import RUN_DATASET
from test_gepa_support import keyword_context, reflection_lm, task_lm, word_problems
from test_gepa_support import run_gepa as run_keyword_gepa

import emery
from emery.algorithms.gepa import Gepa
from emery.algorithms.gepa.settings import GepaSettings
from emery.core.errors import ConfigError
from emery.data.tasks import builtin_task
from emery.evaluation.budget import BudgetConfig
from emery.plugin import (
    Edit,
    GepaState,
    Materials,
    MergeKind,
    MergePlan,
    MergePolicy,
    MinibatchSampler,
    OperatorKind,
    SamplerKind,
    StageConfig,
    find_merge,
)
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

PLANNED: list[MergePlan] = []
JOINED: list[int] = []


class Eager:
    """A merge tried every step once the pool has three members, whether or not the last
    step accepted a child (GEPA's own waits for an acceptance)."""

    def due(self, state: GepaState) -> bool:
        return len(state.pool) >= 3

    def plan(self, state: GepaState, rng: random.Random) -> MergePlan | None:
        plan = find_merge(state, rng)
        if plan is not None:
            PLANNED.append(plan)
        return plan

    def accepted(self, state: GepaState) -> None:
        JOINED.append(len(state.pool))


EAGER = MergeKind("eager", lambda settings: Eager())

CHECK = "Check your work before you answer."


def check_work(edit: Edit, stage: StageConfig, materials: Materials) -> Edit | None:
    """The stage's instruction with a reminder to check the work (once)."""
    if CHECK in edit.instruction:
        return None
    return Edit(f"{edit.instruction} {CHECK}", edit.layout, edit.demos)


CHECK_WORK = OperatorKind("check_work", check_work)


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


def test_eager_is_a_merge_policy() -> None:
    assert isinstance(Eager(), MergePolicy)


async def test_a_gepa_run_merges_when_a_policy_of_ones_own_says() -> None:
    PLANNED.clear()
    JOINED.clear()
    ctx = keyword_context(RUN_DATASET, budget=BudgetConfig(metric_calls=120), seed=1)
    outcome, records = await run_keyword_gepa(ctx, {"merge_policy": f"{__name__}:EAGER"})
    attempted = [e for r in records for e in r.events if e.kind == "gepa.merge_attempted"]
    assert attempted
    assert [e.data["parents"] for e in attempted] == [[p.first, p.second] for p in PLANNED]
    assert JOINED  # told of each child that joined the pool
    assert isinstance(outcome.state, GepaState)
    assert outcome.state.merges_due == 0  # this policy schedules none
    (planned,) = [e for r in records for e in r.events if e.kind == "gepa.plan"]
    assert planned.data["merges"] == 0  # the plan cannot count a plug-in's merges
    assert any("merge_policy" in note for note in planned.data["notes"])


def test_a_gepa_run_offers_an_edit_operator_of_ones_own(tmp_path: Path) -> None:
    store = MemoryStore()
    operators = [f"{__name__}:CHECK_WORK", "answer_stage"]
    result = run_gepa(tmp_path, store, operators=operators, operator_every=1)
    made = {c.lineage.operation for c in store.job_candidates(result.job_id)}
    assert "operator.check_work" in made
    assert {op for op in made if op.startswith("operator.")} <= {
        "operator.check_work",
        "operator.answer_stage",
    }
    checked = [
        c for c in store.job_candidates(result.job_id) if c.lineage.operation.endswith("check_work")
    ]
    assert all(CHECK in c.components["solve"] for c in checked)


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("minibatch_sampler", "algorithm.gepa.minibatch_sampler: unknown minibatch sampler"),
        ("merge_policy", "algorithm.gepa.merge_policy: unknown merge policy"),
        ("operators", "algorithm.gepa.operators: unknown edit operator"),
    ],
)
def test_an_unknown_strategy_is_one_line(setting: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        Gepa(GepaSettings(**{setting: ["nope"] if setting == "operators" else "nope"}))
    assert str(info.value).startswith(f"{message} 'nope'; known ")
    assert "(or name one as 'module:attr')" in str(info.value)
    assert "\n" not in str(info.value)
