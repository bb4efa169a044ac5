"""``{field}`` placeholders: which fields a template reads and how it renders."""

from __future__ import annotations

import pytest

from emery.systems import placeholders, render
from emery.systems.templates import MissingFieldError


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
