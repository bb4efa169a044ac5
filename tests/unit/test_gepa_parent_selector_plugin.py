"""GEPA's parent selector is a plug-in: ``candidate_selection = "module:attr"`` names a
``SelectorKind`` of your own (here: always the newest pool member), built from GEPA's
settings, used for every parent and named in the ``gepa.candidate_selected`` events; an
unknown name is a one-line error listing the built-ins."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from test_gepa_support import reflection_lm, task_lm, word_problems

import emery
from emery.core.errors import ConfigError
from emery.data.tasks import builtin_task
from emery.plugin import GepaState, ParentSelector, SelectorKind
from emery.store import MemoryStore
from emery.systems.prompt_program import PromptProgram

pytestmark = pytest.mark.usefixtures("quiet_evaluator_failures")

CHOSEN: list[str] = []


class Newest:
    """The pool's newest member, every time (GEPA's own never does this)."""

    def select(self, state: GepaState, rng: random.Random) -> tuple[object, dict[str, int]]:
        newest = state.pool[-1]
        CHOSEN.append(newest.id)
        return newest, {}


NEWEST = SelectorKind("newest", lambda settings: Newest())


def test_newest_is_a_parent_selector() -> None:
    assert isinstance(Newest(), ParentSelector)


def test_a_gepa_run_draws_its_parents_with_a_selector_of_ones_own(tmp_path: Path) -> None:
    CHOSEN.clear()
    dataset = word_problems()
    store = MemoryStore()
    result = emery.optimize(
        PromptProgram(builtin_task("word_problems").program),
        dataset,
        algorithm="gepa",
        budget=200,
        verifier="numeric",
        lm=task_lm(dataset),
        reflection_lm=reflection_lm(),
        settings={"candidate_selection": f"{__name__}:NEWEST"},
        runtime={"workdir": str(tmp_path / ".emery")},
        store=store,
    )
    assert result.state == "succeeded", result.error
    selected = store.list_events(result.job_id, kinds=["gepa.candidate_selected"])
    assert selected
    assert {e.data["selection"] for e in selected} == {f"{__name__}:NEWEST"}
    assert [e.data["candidate_id"] for e in selected] == CHOSEN
    pool_order = [c.id for c in store.job_candidates(result.job_id)]
    assert CHOSEN[-1] in pool_order


def test_an_unknown_selector_is_one_line() -> None:
    from emery.algorithms.gepa import Gepa
    from emery.algorithms.gepa.settings import GepaSettings

    with pytest.raises(ConfigError, match=r"unknown parent selector 'newst'; known parent"):
        Gepa(GepaSettings(candidate_selection="newst"))
