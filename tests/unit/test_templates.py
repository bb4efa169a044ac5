"""``{field}`` placeholders: which fields a template reads and how it renders."""

from __future__ import annotations

import pytest

from emery.systems import placeholders, render
from emery.systems.templates import MissingFieldError, literal_pieces


def test_placeholders_are_single_brace_identifiers() -> None:
    assert placeholders("Q: {question}\nContext: {context_1} {question}") == {
        "question",
        "context_1",
    }


def test_json_braces_are_not_placeholders() -> None:
    template = 'Reply as {"name": "...", "age": 3} about {text}. Empty: {} {1} { spaced }'
    assert placeholders(template) == {"text"}
    rendered = render(template, {"text": "Bob"})
    assert rendered == 'Reply as {"name": "...", "age": 3} about Bob. Empty: {} {1} { spaced }'


def test_double_braces_escape_a_placeholder() -> None:
    template = "Write {{name}} literally, then {name}."
    assert placeholders(template) == {"name"}
    assert placeholders("only {{escaped}}") == set()
    assert render(template, {"name": "Ada"}) == "Write {name} literally, then Ada."
    assert render("only {{escaped}}", {}) == "only {escaped}"


def test_render_converts_values_to_text() -> None:
    assert render("{a}|{b}|{c}|{d}", {"a": 3, "b": None, "c": {"k": 1}, "d": "s"}) == (
        '3||{"k": 1}|s'
    )


def test_missing_field_error_names_field_and_available() -> None:
    with pytest.raises(MissingFieldError) as info:
        render("{question} {context}", {"question": "q", "answer": "a"})
    assert info.value.field == "context"
    assert str(info.value) == (
        "placeholder {context} is not an input field (available: answer, question)"
    )
    with pytest.raises(KeyError):
        render("{x}", {})
    with pytest.raises(MissingFieldError, match=r"available: none"):
        render("{x}", {})


def test_any_python_identifier_is_a_placeholder() -> None:
    template = "問題: {問題}\nनाम: {नाम} {_x1} {café}"
    assert placeholders(template) == {"問題", "नाम", "_x1", "café"}
    fields = {"問題": "1+1?", "नाम": "Ada", "_x1": "a", "café": "b"}
    assert render(template, fields) == "問題: 1+1?\nनाम: Ada a b"
    assert render("{{問題}} {問題}", {"問題": "q"}) == "{問題} q"
    with pytest.raises(MissingFieldError, match="問題"):
        render("{問題}", {"question": "q"})


def test_non_identifiers_in_braces_stay_literal() -> None:
    template = "{a-b} {1x} {a.b} {{a-b}} {x y} {,}"
    assert placeholders(template) == set()
    assert render(template, {}) == template


def test_literal_pieces_split_at_placeholders() -> None:
    assert literal_pieces("Q: {問題} then {{kept}} and {a-b}.") == [
        "Q: ",
        " then {{kept}} and {a-b}.",
    ]
