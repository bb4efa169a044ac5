"""Stage output parsers."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from emery.systems import ParseError, ParserConfig


def test_raw_strips() -> None:
    assert ParserConfig().parse("  hello\n") == "hello"


def test_last_line() -> None:
    parser = ParserConfig(kind="last_line")
    assert parser.parse("thinking...\n\n  final answer  \n\n") == "final answer"
    with pytest.raises(ParseError, match="empty"):
        parser.parse(" \n \n")


def test_regex_group_last_match_and_case() -> None:
    parser = ParserConfig(kind="regex", pattern=r"answer:\s*(\d+)")
    assert parser.parse("Answer: 3\nwait, ANSWER: 42") == "42"
    whole = ParserConfig(kind="regex", pattern=r"\d+")
    assert whole.parse("1 then 22") == "22"
    sensitive = ParserConfig(kind="regex", pattern=r"answer: (\d+)", ignore_case=False)
    with pytest.raises(ParseError):
        sensitive.parse("Answer: 3")


def test_regex_dot_matches_newlines() -> None:
    parser = ParserConfig(kind="regex", pattern=r"<a>(.*)</a>")
    assert parser.parse("<a>one\ntwo</a>") == "one\ntwo"


def test_regex_no_match_says_what_was_expected() -> None:
    parser = ParserConfig(kind="regex", pattern=r"Answer: (\d+)")
    with pytest.raises(ParseError, match="must match the pattern") as info:
        parser.parse("I think it is four")
    assert "I think it is four" in str(info.value)


def test_json_plain_and_fenced() -> None:
    parser = ParserConfig(kind="json")
    assert parser.parse('{"a": 1}') == {"a": 1}
    assert parser.parse('Sure:\n```json\n{"a": [1, 2]}\n```\nDone.') == {"a": [1, 2]}
    assert parser.parse('```\n{"b": true}\n```') == {"b": True}
    with pytest.raises(ParseError, match="no JSON"):
        parser.parse("not json at all")


def test_regex_config_needs_a_valid_pattern() -> None:
    with pytest.raises(ValidationError, match=r"parser\.pattern is required"):
        ParserConfig(kind="regex")
    with pytest.raises(ValidationError, match="not a valid regex"):
        ParserConfig(kind="regex", pattern="(unclosed")
    with pytest.raises(ValidationError):
        ParserConfig.model_validate({"kind": "xml"})
    with pytest.raises(ValidationError, match="extra"):
        ParserConfig.model_validate({"kind": "raw", "patern": "x"})
