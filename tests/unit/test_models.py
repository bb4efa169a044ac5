"""Core models, hashing and the sync/async bridge."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from emery.core.aio import run_sync
from emery.core.hashing import canonical_json, content_hash
from emery.core.models import Candidate, Dataset, Demo, Example, Lineage


def _demo(output: str = "4", **kw: Any) -> Demo:
    return Demo(inputs={"question": "2+2?"}, output=output, **kw)


def test_canonical_json_ignores_key_order() -> None:
    assert canonical_json({"b": 1, "a": [1, {"d": 2, "c": 3}]}) == canonical_json(
        {"a": [1, {"c": 3, "d": 2}], "b": 1}
    )
    assert content_hash({"a": 1, "b": 2}) == content_hash({"b": 2, "a": 1})
    assert content_hash({"a": 1}) != content_hash({"a": 2})
    assert len(content_hash("x")) == 16
    assert len(content_hash("x", 40)) == 40


def test_candidate_id_is_a_content_hash_of_components() -> None:
    a = Candidate(components={"solve": "Answer the question."})
    b = Candidate(components={"solve": "Answer the question."})
    c = Candidate(components={"solve": "Answer carefully."})
    assert a.id == b.id
    assert a.id != c.id
    assert len(a.id) == 16


def test_lineage_does_not_change_id() -> None:
    seed = Candidate(components={"solve": "Answer."})
    child = Candidate(
        components={"solve": "Answer."},
        lineage=Lineage(parents=("p1", "p2"), generation=3, operation="merge", iteration=7),
    )
    assert child.id == seed.id


def test_demos_change_id_but_demo_provenance_does_not() -> None:
    base = Candidate(components={"solve": "Answer."})
    with_demo = Candidate(components={"solve": "Answer."}, demos={"solve": (_demo(),)})
    other_demo = Candidate(components={"solve": "Answer."}, demos={"solve": (_demo("5"),)})
    same_demo_other_source = Candidate(
        components={"solve": "Answer."},
        demos={"solve": (_demo(source="bootstrapped", example_id="ex-1"),)},
    )
    assert with_demo.id != base.id
    assert other_demo.id != with_demo.id
    assert same_demo_other_source.id == with_demo.id


def test_empty_demo_set_is_the_same_as_none() -> None:
    assert (
        Candidate(components={"s": "x"}, demos={"s": ()}).id == Candidate(components={"s": "x"}).id
    )


def test_json_round_trip_keeps_id_and_data() -> None:
    candidate = Candidate(
        components={"solve": "Answer.", "check": "Check."},
        demos={"solve": (_demo(),)},
        lineage=Lineage(parents=("abc",), generation=1, operation="reflect"),
    )
    dumped = candidate.model_dump_json()
    assert candidate.id in dumped
    restored = Candidate.model_validate_json(dumped)
    assert restored.id == candidate.id
    assert restored == candidate
    assert restored.lineage.parents == ("abc",)


def test_derive_replaces_only_the_given_components() -> None:
    seed = Candidate(components={"a": "one", "b": "two"}, demos={"a": (_demo(),)})
    child = seed.derive(
        components={"b": "three"}, lineage=Lineage(parents=(seed.id,), operation="reflect")
    )
    assert child.components == {"a": "one", "b": "three"}
    assert child.demos == seed.demos
    assert child.lineage.parents == (seed.id,)
    assert child.id != seed.id
    assert seed.components["b"] == "two"


def test_candidate_is_frozen() -> None:
    candidate = Candidate(components={"a": "one"})
    with pytest.raises(ValueError, match="frozen"):
        candidate.components = {"a": "two"}  # type: ignore[misc]


def test_dataset_splits_sizes_iteration_and_limit() -> None:
    def ex(i: int) -> Example:
        return Example(id=str(i), input={"x": i})

    dataset = Dataset(train=[ex(0), ex(1), ex(2)], val=[ex(3)], test=[ex(4), ex(5)])
    assert dataset.sizes() == {"train": 3, "val": 1, "test": 2}
    assert [e.id for e in dataset] == ["0", "1", "2", "3", "4", "5"]
    assert [e.id for e in dataset.split("test")] == ["4", "5"]
    limited = dataset.limited(1)
    assert limited.sizes() == {"train": 1, "val": 1, "test": 1}
    assert dataset.limited(None) is dataset
    assert dataset.sizes()["train"] == 3


def test_run_sync_without_a_running_loop() -> None:
    async def double(x: int) -> int:
        await asyncio.sleep(0)
        return 2 * x

    assert run_sync(double(21)) == 42


async def test_run_sync_inside_a_running_loop() -> None:
    outer = asyncio.get_running_loop()

    async def which_loop() -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    inner = run_sync(which_loop())
    assert inner is not outer
