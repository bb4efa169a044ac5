"""Built-in generated tasks: deterministic, distinct, and consistent with their verifiers."""

from __future__ import annotations

import json

import pytest

from emery.core.errors import ConfigError
from emery.core.models import Candidate
from emery.data.tasks import BUILTIN_TASKS, builtin_task
from emery.data.tasks.intent import LABELS
from emery.lm import FakeLM
from emery.systems import PromptProgram, RunContext
from emery.verifiers import VerifierConfig, build_verifier

TASK_NAMES = sorted(BUILTIN_TASKS)


def test_the_three_tasks_exist() -> None:
    assert TASK_NAMES == ["extraction", "intent", "word_problems"]


@pytest.mark.parametrize("name", TASK_NAMES)
def test_same_seed_same_data_other_seed_other_data(name: str) -> None:
    task = builtin_task(name)
    first = task.dataset(seed=1, n_train=5, n_val=5, n_test=5)
    again = task.dataset(seed=1, n_train=5, n_val=5, n_test=5)
    other = task.dataset(seed=2, n_train=5, n_val=5, n_test=5)
    assert first == again
    assert [e.input for e in first] != [e.input for e in other]


@pytest.mark.parametrize("name", TASK_NAMES)
def test_default_sizes_and_distinct_examples(name: str) -> None:
    task = builtin_task(name)
    dataset = task.dataset()
    assert tuple(dataset.sizes().values()) == task.sizes
    inputs = [repr(sorted(e.input.items())) for e in dataset]
    assert len(set(inputs)) == len(inputs)
    assert len({e.id for e in dataset}) == len(inputs)
    assert dataset.name == name
    assert dataset.description == task.description
    assert dataset.verifier is not None
    assert dataset.verifier["kind"] == task.verifier.kind


@pytest.mark.parametrize("name", TASK_NAMES)
def test_requested_sizes_are_respected(name: str) -> None:
    dataset = builtin_task(name).dataset(n_train=3, n_val=0, n_test=7)
    assert dataset.sizes() == {"train": 3, "val": 0, "test": 7}


def test_smaller_splits_are_prefixes_of_the_same_stream() -> None:
    task = builtin_task("word_problems")
    small = task.dataset(n_train=0, n_val=0, n_test=5)
    large = task.dataset(n_train=0, n_val=0, n_test=20)
    assert small.test == large.test[:5]


@pytest.mark.parametrize("name", TASK_NAMES)
def test_the_program_reads_only_fields_the_examples_have(name: str) -> None:
    task = builtin_task(name)
    dataset = task.dataset(n_train=2, n_val=2, n_test=2)
    fields = set.intersection(*(set(e.input) for e in dataset))
    PromptProgram(task.program).check_inputs(fields)


async def test_word_problem_answers_satisfy_the_verifier_and_parser() -> None:
    task = builtin_task("word_problems")
    dataset = task.dataset(n_train=0, n_val=0, n_test=60)
    verifier = build_verifier(task.verifier)
    answers = {e.input["question"]: e.expected for e in dataset}
    lm = FakeLM(lambda messages: f"Working...\nAnswer: {answers[messages[-1]['content']]}")
    program = PromptProgram(task.program)
    seed = program.seed_candidate()
    for example in dataset:
        assert isinstance(example.expected, int)
        verdict = await verifier.verify(example, f"Answer: {example.expected}")
        assert verdict.score == 1.0, example
        run = await program.run(seed, RunContext(lm=lm, example=example))
        assert run.error is None
        assert (await verifier.verify(example, run.output)).score == 1.0
    wrong = await verifier.verify(dataset.test[0], f"Answer: {dataset.test[0].expected + 1}")
    assert wrong.score == 0.0


def test_intent_labels_are_from_the_fixed_set() -> None:
    dataset = builtin_task("intent").dataset()
    labels = {e.expected for e in dataset}
    assert labels <= set(LABELS)
    assert len(labels) >= 6
    assert len(LABELS) == 8
    assert all(label in builtin_task("intent").description for label in LABELS)


async def test_extraction_gold_json_satisfies_the_verifier() -> None:
    task = builtin_task("extraction")
    verifier = build_verifier(task.verifier)
    for example in task.dataset(n_train=0, n_val=0, n_test=20):
        assert set(example.expected) == {"name", "age", "city"}
        assert str(example.expected["age"]) in example.input["text"]
        assert example.expected["name"] in example.input["text"]
        verdict = await verifier.verify(example, json.dumps(example.expected))
        assert verdict.score == 1.0


def test_task_verifier_config_round_trips() -> None:
    for task in BUILTIN_TASKS.values():
        dataset = task.dataset(n_train=1, n_val=0, n_test=0)
        assert VerifierConfig.model_validate(dataset.verifier) == task.verifier


def test_seed_candidate_is_the_plain_instruction() -> None:
    program = PromptProgram(builtin_task("word_problems").program)
    assert program.seed_candidate() == Candidate(components={"solve": "Answer the question."})


def test_unknown_task_lists_known_tasks() -> None:
    with pytest.raises(ConfigError, match="unknown built-in task 'chess'") as info:
        builtin_task("chess")
    for name in TASK_NAMES:
        assert name in str(info.value)
