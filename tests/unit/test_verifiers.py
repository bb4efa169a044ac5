"""Verifiers score outputs in [0, 1] and say what was expected."""

from __future__ import annotations

from typing import Any

import pytest

from emery.core.errors import ConfigError
from emery.core.models import Example
from emery.verifiers import (
    Contains,
    ExactMatch,
    FunctionMetric,
    JsonFieldMatch,
    NormalizedMatch,
    NumericMatch,
    RegexMatch,
    TokenF1,
    Verdict,
    Verifier,
    VerifierConfig,
    build_verifier,
)
from emery.verifiers.function import MetricError, metric_verdict
from emery.verifiers.numeric import last_number


def ex(expected: Any, **inputs: Any) -> Example:
    return Example(id="ex-1", input=inputs or {"q": "?"}, expected=expected)


async def score(verifier: Verifier, expected: Any, output: Any) -> Verdict:
    return await verifier.verify(ex(expected), output)


# exact / normalized


async def test_exact_strips_whitespace_only() -> None:
    assert (await score(ExactMatch(), "Paris", "  Paris\n")).score == 1.0
    wrong = await score(ExactMatch(), "Paris", "paris")
    assert wrong.score == 0.0
    assert "Expected exactly 'Paris'" in wrong.feedback
    assert "'paris'" in wrong.feedback


async def test_exact_compares_non_strings_as_json() -> None:
    assert (await score(ExactMatch(), 42, "42")).score == 1.0
    assert (await score(ExactMatch(), None, "")).score == 1.0


async def test_normalized_ignores_case_punctuation_and_articles() -> None:
    verifier = NormalizedMatch()
    assert (await score(verifier, "The Eiffel Tower", "eiffel tower!")).score == 1.0
    assert (await score(verifier, "book_flight", "Book flight")).score == 1.0
    wrong = await score(verifier, "book_flight", "cancel_booking")
    assert wrong.score == 0.0
    assert "Expected 'book_flight'" in wrong.feedback


# numeric


@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("first 3 then 7", 7.0),
        ("Answer: 1,234", 1234.0),
        ("it is -5 degrees", -5.0),
        ("pi is 3.14.", 3.14),
        ("costs $12", 12.0),
        ("ratio .5", 0.5),
        ("no digits here", None),
        ("", None),
    ],
)
def test_last_number(text: str, number: float | None) -> None:
    assert last_number(text) == number


async def test_numeric_takes_the_last_number() -> None:
    verifier = NumericMatch()
    assert (await score(verifier, 12, "3 boxes of 4 give 12")).score == 1.0
    wrong = await score(verifier, 12, "12 is wrong, it is 13")
    assert wrong.score == 0.0
    assert "Expected 12" in wrong.feedback
    assert "13" in wrong.feedback


async def test_numeric_commas_negatives_and_string_expected() -> None:
    verifier = NumericMatch()
    assert (await score(verifier, 1234, "Answer: 1,234")).score == 1.0
    assert (await score(verifier, -7, "Answer: -7")).score == 1.0
    assert (await score(verifier, "1,000", "1000")).score == 1.0
    assert (await score(verifier, 7, "Answer: -7")).score == 0.0


async def test_numeric_output_without_a_number() -> None:
    verdict = await score(NumericMatch(), 5, "I don't know")
    assert verdict.score == 0.0
    assert "Expected the number 5" in verdict.feedback
    assert "has none" in verdict.feedback


async def test_numeric_tolerance() -> None:
    assert (await score(NumericMatch(), 2.0, "2.0000001")).score == 1.0
    assert (await score(NumericMatch(), 2.0, "2.01")).score == 0.0
    assert (await score(NumericMatch(abs_tol=0.05), 2.0, "2.01")).score == 1.0
    assert (await score(NumericMatch(abs_tol=0, rel_tol=0.01), 1000, "1009")).score == 1.0
    assert (await score(NumericMatch(abs_tol=0, rel_tol=0.01), 1000, "1011")).score == 0.0


async def test_numeric_expected_must_be_a_number() -> None:
    with pytest.raises(ValueError, match="not a number"):
        await score(NumericMatch(), "many", "3")


# regex / contains


async def test_regex_substitutes_the_escaped_expected_value() -> None:
    verifier = RegexMatch(r"answer is {expected}\b", ignore_case=True)
    assert (await score(verifier, "3.5", "The Answer is 3.5 exactly")).score == 1.0
    # The dot is escaped: 3x5 does not match 3.5.
    assert (await score(verifier, "3.5", "the answer is 3x5")).score == 0.0
    verdict = await score(verifier, "7", "nothing")
    assert "should match" in verdict.feedback
    assert "answer is 7" in verdict.feedback


async def test_regex_full_and_case() -> None:
    assert (await score(RegexMatch(r"\d+", full=True), None, "123")).score == 1.0
    assert (await score(RegexMatch(r"\d+", full=True), None, "123a")).score == 0.0
    assert (await score(RegexMatch("yes"), None, "YES")).score == 0.0
    assert (await score(RegexMatch("yes", ignore_case=True), None, "YES")).score == 1.0


def test_regex_invalid_pattern_fails_early() -> None:
    with pytest.raises(Exception, match=r"unterminated|missing"):
        RegexMatch("(unclosed")


async def test_contains() -> None:
    assert (await score(Contains(), "Paris", "It is paris, France")).score == 1.0
    assert (await score(Contains(case_sensitive=True), "Paris", "it is paris")).score == 0.0
    verdict = await score(Contains(), "Lyon", "Paris")
    assert verdict.score == 0.0
    assert "should contain 'Lyon'" in verdict.feedback


# json_field


EXPECTED_PERSON = {"name": "Maria Lopez", "age": 34, "city": "Denver"}


async def test_json_field_all_correct() -> None:
    output = '{"name": "maria lopez", "age": "34", "city": "Denver"}'
    verdict = await score(JsonFieldMatch(), EXPECTED_PERSON, output)
    assert verdict.score == 1.0
    assert "Correct" in verdict.feedback


async def test_json_field_partial_credit_names_wrong_fields() -> None:
    output = {"name": "Maria Lopez", "age": 35}
    verdict = await score(JsonFieldMatch(), EXPECTED_PERSON, output)
    assert verdict.score == pytest.approx(1 / 3)
    assert "2 of 3 fields wrong" in verdict.feedback
    assert "age: expected 34, got 35" in verdict.feedback
    assert 'city: expected "Denver", got nothing' in verdict.feedback
    assert "name:" not in verdict.feedback


async def test_json_field_reads_fenced_json_and_selected_fields() -> None:
    output = 'Here you go:\n```json\n{"name": "Maria Lopez", "age": 1, "city": "Denver"}\n```'
    assert (await score(JsonFieldMatch(), EXPECTED_PERSON, output)).score == pytest.approx(2 / 3)
    only_some = JsonFieldMatch(fields=["name", "city"])
    assert (await score(only_some, EXPECTED_PERSON, output)).score == 1.0


async def test_json_field_finds_a_bare_object_in_prose() -> None:
    output = 'Result: {"name": "Maria Lopez", "age": 34, "city": "Denver"} done.'
    assert (await score(JsonFieldMatch(), EXPECTED_PERSON, output)).score == 1.0


async def test_json_field_non_json_output() -> None:
    verdict = await score(JsonFieldMatch(), EXPECTED_PERSON, "Maria, 34, Denver")
    assert verdict.score == 0.0
    assert "must be a JSON object" in verdict.feedback
    listed = await score(JsonFieldMatch(), EXPECTED_PERSON, "[1, 2]")
    assert listed.score == 0.0
    assert "must be a JSON object" in listed.feedback


async def test_json_field_expected_json_string_is_parsed() -> None:
    expected = '{"a": 1}'
    assert (await score(JsonFieldMatch(), expected, '{"a": 1.0}')).score == 1.0


# token F1


async def test_f1_partial_overlap() -> None:
    verdict = await score(TokenF1(), "red apple pie", "red pie with cream")
    # common = 2, precision 2/4, recall 2/3 → F1 = 4/7
    assert verdict.score == pytest.approx(4 / 7)
    assert "missing 'apple'" in verdict.feedback
    assert "extra 'with cream'" in verdict.feedback


async def test_f1_extremes() -> None:
    assert (await score(TokenF1(), "The Cat", "cat")).score == 1.0
    none = await score(TokenF1(), "cat", "dog")
    assert none.score == 0.0
    assert "expected 'cat'" in none.feedback
    assert (await score(TokenF1(), "", "")).score == 1.0


# python callables


async def test_callable_two_args_bool() -> None:
    verifier = FunctionMetric(lambda example, output: output == example.expected)
    assert (await score(verifier, "a", "a")).score == 1.0
    assert (await score(verifier, "a", "b")).score == 0.0


async def test_callable_three_args_gets_the_trace() -> None:
    seen: list[Any] = []

    def check(example: Example, output: Any, trace: Any) -> tuple[float, str]:
        seen.append(trace)
        return 0.5, "half right"

    verdict = await FunctionMetric(check).verify(ex("x"), "y", trace={"calls": 2})
    assert verdict == Verdict(score=0.5, feedback="half right")
    assert seen == [{"calls": 2}]


async def test_callable_async_and_dict() -> None:
    async def check(example: Example, output: Any) -> dict[str, Any]:
        return {"score": 0.25, "feedback": "meh"}

    assert await FunctionMetric(check).verify(ex("x"), "y") == Verdict(score=0.25, feedback="meh")


async def test_callable_by_reference() -> None:
    verifier = build_verifier(
        VerifierConfig(kind="python", function="verifier_funcs:starts_with_expected")
    )
    assert (await score(verifier, "ab", "abc")).score == 1.0
    assert (await score(verifier, "ab", "ba")).score == 0.0


def test_callable_reference_errors() -> None:
    with pytest.raises(ConfigError, match="not callable"):
        FunctionMetric("verifier_funcs:NOT_CALLABLE")
    with pytest.raises(ConfigError, match="module:attribute"):
        FunctionMetric("verifier_funcs")


def test_verdict_shapes() -> None:
    assert metric_verdict(True, "m", "e1") == Verdict(score=1.0)
    assert metric_verdict(0, "m", "e1") == Verdict(score=0.0)
    assert metric_verdict(Verdict(score=0.3, feedback="f"), "m", "e1").feedback == "f"
    assert metric_verdict((1, "ok"), "m", "e1") == Verdict(score=1.0, feedback="ok")
    with pytest.raises(MetricError, match="'good'"):
        metric_verdict("good", "m", "e1")
    with pytest.raises(MetricError, match="must be in"):
        metric_verdict(2.0, "m", "e1")


async def test_a_python_verifier_gets_the_trace_even_where_it_has_a_default() -> None:
    seen: list[Any] = []

    def check(example: Any, output: Any, trace: Any = None) -> float:
        seen.append(trace)
        return 1.0

    await FunctionMetric(check, style="verifier").verify(ex("x"), "y", trace={"calls": 1})
    await FunctionMetric(check).verify(ex("x"), "y", trace={"calls": 1})  # a DSPy metric
    assert seen == [{"calls": 1}, None]


# factory


@pytest.mark.parametrize(
    ("config", "cls"),
    [
        (VerifierConfig(), ExactMatch),
        (VerifierConfig(kind="normalized"), NormalizedMatch),
        (VerifierConfig(kind="numeric", abs_tol=0.5), NumericMatch),
        (VerifierConfig(kind="regex", pattern="x"), RegexMatch),
        (VerifierConfig(kind="contains"), Contains),
        (VerifierConfig(kind="json_field", fields=["a"]), JsonFieldMatch),
        (VerifierConfig(kind="f1"), TokenF1),
    ],
)
def test_build_verifier_kinds(config: VerifierConfig, cls: type) -> None:
    assert isinstance(build_verifier(config), cls)


def test_build_verifier_passes_options() -> None:
    numeric = build_verifier(VerifierConfig(kind="numeric", abs_tol=0.5, rel_tol=0.1))
    assert isinstance(numeric, NumericMatch)
    assert (numeric.abs_tol, numeric.rel_tol) == (0.5, 0.1)
    fields = build_verifier(VerifierConfig(kind="json_field", fields=["a"]))
    assert isinstance(fields, JsonFieldMatch)
    assert fields.fields == ["a"]


def test_build_verifier_errors() -> None:
    with pytest.raises(ConfigError, match="pattern"):
        build_verifier(VerifierConfig(kind="regex"))
    with pytest.raises(ConfigError, match="function"):
        build_verifier(VerifierConfig(kind="python"))
    with pytest.raises(ConfigError, match="not a valid regex"):
        build_verifier(VerifierConfig(kind="regex", pattern="(unclosed"))
