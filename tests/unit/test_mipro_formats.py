"""Reply formats derived from stage parsers: prefixes, format sentences, labeled replies."""

from __future__ import annotations

import pytest

from emery.data.tasks import builtin_task
from emery.systems.formats import (
    format_sentence,
    labeled_replies,
    parse_reply,
    regex_prefix,
)
from emery.systems.parsers import ParserConfig
from emery.systems.prompt_program import MessageTemplate, StageConfig


def stage(parser: ParserConfig) -> StageConfig:
    return StageConfig(name="s", messages=[MessageTemplate(template="{q}")], parser=parser)


@pytest.mark.parametrize(
    ("pattern", "prefix"),
    [
        (r"Answer:\s*\$?(-?[\d,]*\.?\d+)", "Answer: "),
        (r"Label:\s+(\w+)", "Label: "),
        (r"Final answer is (?P<x>\d+)", "Final answer is "),
        (r"^Result = (.*)", "Result = "),
        (r"(\d+)", ""),
        (r"\d+", None),
        (r"(?:a|b)(x)", None),
        (r"[A-Z]+: (.*)", None),
    ],
)
def test_regex_prefix(pattern: str, prefix: str | None) -> None:
    assert regex_prefix(pattern) == prefix


def test_word_problem_gold_is_written_for_the_answer_parser() -> None:
    solve = builtin_task("word_problems").program.stages[0]

    replies = labeled_replies(solve, 42)

    assert replies[0] == "Answer: 42"
    assert parse_reply(solve, replies[0]) == (True, "42")
    assert parse_reply(solve, "forty-two") == (False, None)


def test_format_sentences_follow_the_parser() -> None:
    solve = builtin_task("word_problems").program.stages[0]
    lead = "End your reply with a final line of the form"
    assert format_sentence(solve) == f"{lead} 'Answer: <number>'."
    labelled = stage(ParserConfig(kind="regex", pattern=r"Label:\s*(\w+)"))
    assert format_sentence(labelled) == f"{lead} 'Label: <answer>'."
    assert format_sentence(stage(ParserConfig(kind="json")), {"name": "x", "age": 3}) == (
        'Reply with a JSON object with the keys "name", "age".'
    )
    assert format_sentence(stage(ParserConfig(kind="raw"))) is None


def test_json_and_raw_gold() -> None:
    assert labeled_replies(stage(ParserConfig(kind="json")), {"a": 1}) == ['{"a": 1}']
    assert labeled_replies(stage(ParserConfig(kind="raw")), "refund") == ["refund"]
    assert labeled_replies(stage(ParserConfig(kind="raw")), "  ") == []
