"""The built-in long-document QA task: 50 000+ word documents with planted facts, made
fast and deterministically from a seed."""

from __future__ import annotations

import random
import time

import pytest

from emery.core.errors import ConfigError
from emery.data.tasks import GRAPH_TASKS, builtin_task
from emery.data.tasks.long_document import MIN_WORDS, generate
from emery.systems.graph.system import GraphSystem
from emery.systems.registry import build_system, parse_system_config
from emery.verifiers import build_verifier


def test_same_seed_same_documents_other_seed_others() -> None:
    task = builtin_task("long_document_qa")
    first = task.dataset(seed=1, n_train=1, n_val=1, n_test=2)
    assert first == task.dataset(seed=1, n_train=1, n_val=1, n_test=2)
    other = task.dataset(seed=2, n_train=1, n_val=1, n_test=2)
    assert [e.input for e in first] != [e.input for e in other]
    assert first.name == "long_document_qa"
    assert first.verifier == {"kind": "contains"}


def test_a_document_is_long_made_fast_and_holds_each_fact_once() -> None:
    rng = random.Random("long")
    started = time.perf_counter()
    inputs, answer = generate(rng)
    elapsed = time.perf_counter() - started
    assert elapsed < 0.5
    document = inputs["document"]
    assert len(document.split()) >= MIN_WORDS
    facts = [line for line in document.splitlines() if line.endswith(f" is {answer}.")]
    assert len(facts) == 1
    attribute, person = inputs["question"][len("What is the ") : -1].split(" of ")
    assert facts[0] == f"The {attribute} of {person} is {answer}."
    assert document.count(person) == 1
    assert document.count(attribute) == 1


async def test_the_gold_answer_satisfies_the_verifier_and_a_wrong_one_does_not() -> None:
    task = builtin_task("long_document_qa")
    example = task.dataset(n_train=0, n_val=0, n_test=1).test[0]
    verifier = build_verifier(task.verifier)
    assert (await verifier.verify(example, f"It is {example.expected}.")).score == 1.0
    assert (await verifier.verify(example, "It is 11111.")).score == 0.0


def test_the_task_is_registered_and_starts_from_an_rlm_graph() -> None:
    task = GRAPH_TASKS["long_document_qa"]
    assert builtin_task("long_document_qa") is task
    system = build_system(parse_system_config(task.system or {}))
    assert isinstance(system, GraphSystem)
    assert system.graph.graph_type == "rlm"
    assert system.graph.rlm is not None
    assert system.graph.rlm.context == "document"
    system.check_inputs({"document", "question"})
    with pytest.raises(ConfigError, match="long_document_qa"):
        builtin_task("nope")
