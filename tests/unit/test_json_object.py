"""Structured outputs: the ``json_object`` verifier (exact and key-value F1), the
``json_object`` parser, its reply format in the format operators, and a slot-extraction
eval job with a scripted model."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from emery.algorithms.operators import apply_operator
from emery.config import load_config, parse_config
from emery.config.evaluation_scope import evaluation_scope
from emery.config.resolve import resolve_dataset, resolve_system, resolve_verifier
from emery.core.models import ChatMessage, Example
from emery.jobs.evaluate import evaluate_config
from emery.lm import FakeLM
from emery.systems import ParseError, ParserConfig
from emery.systems.formats import format_sentence, labeled_replies, parse_reply
from emery.systems.prompt_layout import StageLayout
from emery.systems.prompt_program import (
    MessageTemplate,
    PromptProgram,
    PromptProgramConfig,
    StageConfig,
)
from emery.verifiers.config import VerifierConfig, build_verifier
from emery.verifiers.json_object import JsonObjectMatch, normalize_text, normalized_value

ROOT = Path(__file__).resolve().parents[2]
F1 = JsonObjectMatch()
EXACT = JsonObjectMatch(match="exact")


def example(expected: Any) -> Example:
    return Example(id="e1", input={"text": "t"}, expected=expected)


def check(verifier: JsonObjectMatch, expected: Any, output: Any) -> tuple[float, str]:
    verdict = verifier.check(example(expected), output)
    return verdict.score, verdict.feedback


# --- the verifier -------------------------------------------------------------------


def test_empty_expected_and_empty_reply_is_a_perfect_score() -> None:
    for verifier in (F1, EXACT):
        assert check(verifier, "{}", "{}")[0] == 1.0
        assert check(verifier, "{}", {})[0] == 1.0


def test_empty_sides_define_precision_and_recall() -> None:
    # nothing expected, something replied: precision 0, recall 1 -> F1 0
    score, feedback = check(F1, "{}", '{"date": "today"}')
    assert score == 0.0
    assert 'extra keys: "date" (= "today")' in feedback
    # something expected, nothing replied: precision 1, recall 0 -> F1 0
    score, feedback = check(F1, '{"people": "3"}', "{}")
    assert score == 0.0
    assert 'missing keys: "people" (expected "3")' in feedback


def test_f1_counts_right_pairs_and_names_missing_extra_and_wrong() -> None:
    expected = '{"people": "14 people", "time": "7:45pm", "date": "friday"}'
    reply = '{"people": "14", "time": "7:45PM.", "first_name": "Ann"}'
    score, feedback = check(F1, expected, reply)
    # right: time; wrong: people; missing: date; extra: first_name -> P 1/3, R 1/3
    assert score == pytest.approx(1 / 3)
    assert feedback.startswith("Key-value F1 0.33 (precision 0.33, recall 0.33)")
    assert 'missing keys: "date" (expected "friday")' in feedback
    assert 'extra keys: "first_name" (= "Ann")' in feedback
    assert 'wrong values: "people" expected "14 people" but got "14"' in feedback


def test_f1_normalises_keys_and_values_lightly() -> None:
    expected = '{"first_name": "Ann Lee", "time": "12:00 PM", "people": "3"}'
    reply = {" First_Name ": "  ann   LEE. ", "TIME": '"12:00 pm"', "people": 3}
    assert check(F1, expected, reply) == (
        1.0,
        'Correct: every key and value of {"first_name": "Ann Lee", "time": "12:00 PM", '
        '"people": "3"}.',
    )
    # exact mode compares what was written
    score, feedback = check(EXACT, expected, reply)
    assert score == 0.0
    assert feedback.startswith("Expected exactly")
    assert '"first_name" (expected "Ann Lee")' in feedback


def test_normalisation_keeps_signs_and_symbols() -> None:
    assert normalize_text("  «Hello,   World!» ") == "hello, world"
    assert normalize_text("-3") == "-3"
    assert normalize_text("$5.") == "$5"
    assert normalized_value(-3) == "-3"
    assert normalized_value(3.5) == "3.5"
    assert normalized_value(True) == "true"
    assert normalized_value(None) == "null"
    assert check(F1, '{"n": -3}', '{"n": "3"}')[0] == 0.0


def test_nested_values_are_compared_as_normalised_json_text() -> None:
    expected = '{"party": {"Adults": "Two", "kids": ["Ann", "Bo"]}}'
    assert check(F1, expected, '{"party": {"adults": "two ", "KIDS": ["ann", "bo"]}}')[0] == 1.0
    assert check(F1, expected, '{"party": {"adults": "two", "kids": ["bo", "ann"]}}')[0] == 0.0
    # a list is not the string it holds
    assert check(F1, '{"a": ["x"]}', '{"a": "x"}')[0] == 0.0


def test_exact_match_of_the_parsed_object() -> None:
    assert check(EXACT, '{"a": "1", "b": [1, 2]}', '```json\n{"b": [1, 2], "a": "1"}\n```') == (
        1.0,
        'Correct: exactly {"a": "1", "b": [1, 2]}.',
    )
    score, feedback = check(EXACT, '{"a": "1"}', '{"a": 1}')
    assert score == 0.0
    assert 'wrong values: "a" expected "1" but got 1' in feedback
    assert check(EXACT, '{"a": 1}', '{"a": 1.0}')[0] == 0.0


def test_an_unparseable_reply_scores_zero_and_says_why() -> None:
    score, feedback = check(F1, '{"people": "3"}', "There are three people.")
    assert score == 0.0
    assert feedback.startswith('The reply must be a JSON object like {"people": "3"}')
    assert "has no JSON object" in feedback
    score, feedback = check(F1, '{"people": "3"}', "{'people': '3'}")
    assert score == 0.0
    assert "Expecting property name enclosed in double quotes" in feedback
    score, feedback = check(F1, '{"people": "3"}', ["3"])
    assert (score, "is a list, not a JSON object" in feedback) == (0.0, True)


def test_an_expected_value_that_is_not_an_object_is_an_error() -> None:
    with pytest.raises(ValueError, match="is not JSON"):
        F1.check(example("three"), "{}")
    with pytest.raises(ValueError, match="not a JSON object"):
        F1.check(example("[1]"), "{}")
    assert F1.check(example({"a": "x"}), '{"a": "X"}').score == 1.0


FLAT_SCOPE_BEFORE_PER_KIND_MODELS = {
    "abs_tol": 1e-6,
    "rel_tol": 0.0,
    "pattern": None,
    "full": False,
    "ignore_case": False,
    "case_sensitive": False,
    "fields": None,
    "function": None,
    "criteria": [],
}
"""What one flat settings table held for every kind, at its defaults: the scopes of the
evaluations stored then."""


def test_the_config_builds_either_match_and_keeps_old_scopes() -> None:
    built = build_verifier(VerifierConfig(kind="json_object"))
    assert isinstance(built, JsonObjectMatch)
    assert built.match == "f1"
    exact = build_verifier(VerifierConfig.model_validate({"kind": "json_object", "match": "exact"}))
    assert isinstance(exact, JsonObjectMatch)
    assert exact.match == "exact"

    def scope(verifier: dict[str, Any]) -> str:
        config = parse_config({"dataset": {"task": "word_problems"}, "verifier": verifier})
        dataset = resolve_dataset(config)
        verifying = resolve_verifier(config, dataset)
        return evaluation_scope(config, resolve_system(config), verifying, dataset=dataset)

    # a setting added later leaves the scopes stored before it unchanged
    assert "match" not in VerifierConfig(kind="numeric").scope_settings()
    assert VerifierConfig(kind="numeric").scope_settings() == {
        "kind": "numeric",
        **FLAT_SCOPE_BEFORE_PER_KIND_MODELS,
    }
    assert VerifierConfig(kind="json_object", match="exact").scope_settings() == {
        "kind": "json_object",
        **FLAT_SCOPE_BEFORE_PER_KIND_MODELS,
        "match": "exact",
    }
    assert scope({"kind": "json_object"}) != scope({"kind": "json_object", "match": "exact"})


# --- the parser ---------------------------------------------------------------------

OBJECT = ParserConfig(kind="json_object")


@pytest.mark.parametrize(
    ("reply", "parsed"),
    [
        ('{"a": 1}', {"a": 1}),
        ('Sure! Here it is:\n```json\n{"a": "x"}\n```\nHope that helps.', {"a": "x"}),
        ('```\n{"a": 2}\n```', {"a": 2}),
        ('The slots are {"date": "today"} as asked.', {"date": "today"}),
        (
            '{"outer": {"inner": {"x": [1, {"y": 2}]}}} trailing',
            {"outer": {"inner": {"x": [1, {"y": 2}]}}},
        ),
        ('{"note": "use } and { freely", "b": "}"}', {"note": "use } and { freely", "b": "}"}),
        ('I think {not json} but {"a": 1}', {"a": 1}),
        ('first {"a": 1} then {"b": 2}', {"a": 1}),
        ('prose {"a": 1}\n```json\n{"b": 2}\n```', {"b": 2}),
        ('```python\nx = {"p": 1}\n```\n```json\n{"b": 2}\n```', {"b": 2}),
        ('```json\n{"a": 1}', {"a": 1}),
        ("{}", {}),
        ('[{"a": 1}]', {"a": 1}),
    ],
)
def test_json_object_parser_reads_the_first_object(reply: str, parsed: dict[str, Any]) -> None:
    assert OBJECT.parse(reply) == parsed


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        ("no object here", "has no JSON object"),
        ("   ", "the reply is empty"),
        ("{'a': 1}", "no JSON object that parses \\(Expecting property name"),
        ('{"a": 1', "no JSON object that parses"),
        ("[1, 2]", "has no JSON object"),
    ],
)
def test_json_object_parser_says_why_there_is_none(reply: str, why: str) -> None:
    with pytest.raises(ParseError, match=why):
        OBJECT.parse(reply)


# --- the reply format and the format operators -------------------------------------------


def extract_program(instruction: str = "Extract the slots.") -> PromptProgram:
    stage = StageConfig(
        name="extract",
        instruction=instruction,
        messages=[MessageTemplate(template="{text}")],
        parser=ParserConfig(kind="json_object"),
    )
    return PromptProgram(PromptProgramConfig(stages=[stage]))


JSON_SENTENCE = "Reply with a JSON object and nothing else ({} if there is nothing to put in it)."


def test_the_json_object_format_states_the_reply_and_writes_gold_replies() -> None:
    stage = extract_program().stages["extract"]
    # no gold example's keys: in extraction they differ from row to row
    assert format_sentence(stage, {"people": "3"}) == JSON_SENTENCE
    gold = '{"people": "3"}'
    assert labeled_replies(stage, gold) == [gold]
    assert parse_reply(stage, gold) == (True, {"people": "3"})


def test_the_format_operators_propose_the_json_object_format() -> None:
    program = extract_program()
    seed = program.seed_candidate()
    reminded = apply_operator("format_reminder", seed, program, "extract")
    assert reminded is not None
    assert StageLayout.of(reminded.components, "extract").reminder == JSON_SENTENCE
    terse = apply_operator("terse", seed, program, "extract")
    assert terse is not None
    assert terse.components["extract"].endswith(JSON_SENTENCE)
    stepped = apply_operator("step_by_step", seed, program, "extract")
    assert stepped is not None  # the parser reads the object out of a longer reply
    restating = apply_operator("answer_stage", seed, program, "extract")
    assert restating is not None
    assert apply_operator("format_reminder", reminded, program, "extract") is None  # has it


# --- a config and an eval job --------------------------------------------------------

ROWS = [
    ("r1", "A table for 4 at 7pm please", "nothing", {"people": "4", "time": "7pm"}, "val"),
    ("r2", "Can I sit inside?", "nothing", {}, "val"),
    ("r3", "It's under Ann Lee", "first_name, last_name", {"first_name": "Ann"}, "val"),
    ("r4", "Two of us, please", "people", {"people": "Two"}, "train"),
]
ANN = '{"first_name": "Ann"}'
REPLIES = {
    "A table for 4 at 7pm please": 'Here you go:\n```json\n{"people": "4", "time": "7 pm"}\n```',
    "Can I sit inside?": "{}",
    "It's under Ann Lee": "The name is Ann Lee.",
}


def slot_model(messages: Sequence[ChatMessage]) -> str:
    text = messages[-1]["content"].rsplit("Customer: ", 1)[1]
    return REPLIES[text]


SLOT_LM = FakeLM(slot_model, model="fake/slots")
"""Loaded by the eval config as ``python/test_json_object:SLOT_LM``."""


def slot_config(tmp_path: Path) -> dict[str, Any]:
    data = tmp_path / "slots.jsonl"
    data.write_text(
        "".join(
            json.dumps(
                {
                    "id": row_id,
                    "input": {"text": text, "asked": asked},
                    "expected": json.dumps(slots),
                    "split": split,
                }
            )
            + "\n"
            for row_id, text, asked, slots, split in ROWS
        )
    )
    bench = load_config(ROOT / "benchmarks/quality/real/restaurant8k.toml")
    assert bench.system is not None
    return {
        "dataset": {"path": str(data)},
        "system": bench.system.model_dump(mode="json"),
        "verifier": {"kind": "json_object"},
        "lm": {"task": {"model": "python/test_json_object:SLOT_LM"}},
        "runtime": {"workdir": str(tmp_path / ".emery")},
    }


def test_the_restaurant_config_validates_with_the_new_parser_and_verifier() -> None:
    config = load_config(ROOT / "benchmarks/quality/real/restaurant8k.toml")
    assert config.verifier is not None
    assert isinstance(build_verifier(config.verifier), JsonObjectMatch)
    stage = resolve_system(config).stages["extract"]  # type: ignore[attr-defined]
    assert stage.parser.kind == "json_object"
    assert "JSON object" in stage.instruction


def test_an_eval_job_scores_slot_extraction_with_the_scripted_model(tmp_path: Path) -> None:
    config = parse_config(slot_config(tmp_path))
    dataset = resolve_dataset(config, tmp_path)
    assert [e.expected for e in dataset.val] == ['{"people": "4", "time": "7pm"}', "{}", ANN]
    assert [e.id for e in dataset.train] == ["r4"]
    assert dataset.test == []

    report = asyncio.run(evaluate_config(config, split="val", base_dir=tmp_path))

    by_id = {r.example_id: r for r in report.results}
    # fenced after prose; "7 pm" is not "7pm" (inner spaces are collapsed, not removed)
    assert by_id["r1"].score == 0.5
    assert 'wrong values: "time" expected "7pm" but got "7 pm"' in by_id["r1"].feedback
    assert by_id["r2"].score == 1.0  # {} for {}
    assert by_id["r3"].score == 0.0
    assert "has no JSON object" in by_id["r3"].feedback
    assert report.summary.mean == pytest.approx(0.5)
    assert len(report.results) == 3
