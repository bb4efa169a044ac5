"""Shared proposal checks: dropped placeholders are put back, invented ones are not."""

from __future__ import annotations

from emery.algorithms.proposal_checks import (
    instruction_problem,
    placeholder_problem,
    repeats_itself,
    restore_placeholders,
)


def test_the_sentence_holding_a_dropped_placeholder_is_appended() -> None:
    original = "Classify the request. Intents: {labels}. Reply with the label only."
    restored = restore_placeholders("Pick the one intent that fits the request.", original)
    assert restored == "Pick the one intent that fits the request.\nIntents: {labels}."
    assert placeholder_problem(original, restored) is None


def test_lines_count_as_pieces_and_repeats_are_kept_once() -> None:
    original = "Question:\n{question} {question}\nAnswer it."
    assert restore_placeholders("Answer carefully.", original) == (
        "Answer carefully.\n{question} {question}"
    )


def test_a_proposal_that_keeps_its_placeholders_is_untouched() -> None:
    assert restore_placeholders("Use {a} twice: {a}.", "Read {a}.") == "Use {a} twice: {a}."
    assert placeholder_problem("Read {a}.", restore_placeholders("Use {b}.", "Read {a}.")) == (
        "invented placeholder {b}"
    )


def test_a_looping_proposal_is_rejected_by_every_algorithms_checks() -> None:
    loop = (
        "Interpret the data in the training set.\n"
        "The output should be the number of cups of flour needed.\n"
        "Each stage is one call to a language model.\n"
        "The output should be the number of cups of flour needed.\n"
        "Each stage is one call to a language model.\n"
        "The output should be the number of cups of flour needed.\n"
    )
    assert instruction_problem(loop) == "repeats the same line over and over"
    fine = "Solve the problem step by step. Check the arithmetic. Answer: step by step."
    assert instruction_problem(fine) is None
    assert not repeats_itself("Be brief. Be brief. Be brief. Reply with the number only.")
