"""GEPA's strategies are plug-ins like its parent selector: the minibatch sampler, the
merge policy, the edit operators and the acceptance rule each take a built-in name, a
``"module:attr"`` of your own or an entry point. A GEPA run with one of this module's
uses it (each records what it did), and an unknown name is a one-line error that lists
the known ones."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from test_gepa_merge import RUN_DATASET
from test_gepa_support import (
    keyword_context,
    reflection_lm,
    task_lm,
    word_problem_context,
    word_problems,
)
from test_gepa_support import run_gepa as run_keyword_gepa

import emery
from emery.algorithms.gepa import Gepa
from emery.algorithms.gepa.acceptance import ACCEPTANCE_RULES
from emery.algorithms.gepa.settings import GepaSettings
from emery.core.errors import ConfigError
from emery.data.tasks import builtin_task
from emery.evaluation.budget import BudgetConfig
from emery.plugin import (
    AcceptanceKind,
    AcceptanceRule,
    Edit,
    EvalResult,
    Evidence,
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


ASKED: list[tuple[float, float]] = []


@dataclass(frozen=True)
class NotBehind:
    """A child not behind its parent on its minibatch (which alone decides) joins the pool;
    the best mean val wins. GEPA's own rules want it ahead."""

    further_evidence: bool = False
    val_gate: bool = False
    winner_confidence: float | None = None

    def accepts(self, before: EvalResult, after: EvalResult, evidence: Evidence | None) -> bool:
        ASKED.append((before.total, after.total))
        return after.total >= before.total


NOT_BEHIND = AcceptanceKind("not_behind", lambda settings: NotBehind())


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


def test_not_behind_and_the_built_ins_are_acceptance_rules() -> None:
    assert isinstance(NotBehind(), AcceptanceRule)
    for name in ("evidence", "two_stage"):
        assert isinstance(ACCEPTANCE_RULES.get(name).build(GepaSettings()), AcceptanceRule)


async def test_a_gepa_run_accepts_children_by_a_rule_of_ones_own() -> None:
    ASKED.clear()
    ctx = word_problem_context(word_problems(), budget=BudgetConfig(metric_calls=150))
    settings = {"acceptance": f"{__name__}:NOT_BEHIND", "minibatch_size": 3, "use_merge": False}
    outcome, records = await run_keyword_gepa(ctx, settings)
    state = outcome.state
    assert isinstance(state, GepaState)
    verdicts = [
        e
        for r in records
        for e in r.events
        if e.kind in ("gepa.minibatch_accepted", "gepa.minibatch_rejected")
    ]
    assert len(ASKED) == len(verdicts) == state.counters.proposals > 0  # asked once a child
    assert [(e.data["before"], e.data["after"]) for e in verdicts] == ASKED
    for event in verdicts:
        accepted = event.kind == "gepa.minibatch_accepted"
        assert accepted == (event.data["after"] >= event.data["before"])
        assert event.data["evidence"]["n"] == 3  # the minibatch alone: no further examples
    assert any(e.data["after"] == e.data["before"] for e in verdicts if "accepted" in e.kind)
    assert state.winner_confidence is None
    assert state.counters.left_out == 0  # no val gate: every accepted child joined
    assert len(state.pool) == 1 + state.counters.accepted


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("candidate_selection", "algorithm.gepa.candidate_selection: unknown parent selector"),
        ("minibatch_sampler", "algorithm.gepa.minibatch_sampler: unknown minibatch sampler"),
        ("merge_policy", "algorithm.gepa.merge_policy: unknown merge policy"),
        ("operators", "algorithm.gepa.operators: unknown edit operator"),
        ("acceptance", "algorithm.gepa.acceptance: unknown acceptance rule"),
    ],
)
def test_an_unknown_strategy_is_one_line(setting: str, message: str) -> None:
    """Said when GEPA is built: by the job's check, before the job is stored (the
    bad-input corpus runs it through ``emery train``: ``cases_strategies.py``)."""
    unknown: Any = ["answer_stage", "nope"] if setting == "operators" else "nope"
    with pytest.raises(ConfigError) as info:
        Gepa(GepaSettings(**{setting: unknown}))
    assert str(info.value).startswith(f"{message} 'nope'; known ")
    assert "(or name one as 'module:attr')" in str(info.value)
    assert "\n" not in str(info.value)


def test_an_unknown_acceptance_rule_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError) as info:
        Gepa(GepaSettings(acceptance="two-stage"))
    assert str(info.value) == (
        "algorithm.gepa.acceptance: unknown acceptance rule 'two-stage'; known acceptance"
        " rules: evidence, two_stage (or name one as 'module:attr')"
    )


def test_a_strategy_that_does_not_import_fails_when_gepa_is_built() -> None:
    with pytest.raises(ConfigError, match=r"^algorithm\.gepa\.acceptance: cannot import"):
        Gepa(GepaSettings(acceptance="no_such_module:RULE"))
