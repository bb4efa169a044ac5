"""What a peer script reads (benchmarks/quality/common.py's ``peer_examples``): the user turn
emery's task model reads; and how it scores (peers/scoring.py): JSON-object replies exactly as
emery's parser and verifier do (same scores, feedback and parse errors), so a peer searches
on the metric emery reports."""

from __future__ import annotations

import ast
import asyncio
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from emery.core.models import Dataset, Example
from emery.systems.parsers import ParseError, ParserConfig
from emery.systems.stages import StageConfig
from emery.verifiers.json_object import JsonObjectMatch

QUALITY = Path(__file__).resolve().parents[2] / "benchmarks" / "quality"
sys.path[:0] = [str(QUALITY), str(QUALITY / "peers")]

import scoring  # noqa: E402
from common import PEER_FIELD, input_field, peer_examples  # noqa: E402

GOLD: dict[str, Any] = {"people": "4", "time": "7pm", "first_name": "Ana"}

REPLIES = [
    '{"people": "4", "time": "7pm", "first_name": "Ana"}',
    'Sure! ```json\n{"People": 4, "time": " 7PM.", "first_name": "ana"}\n```',
    '{"people": "5", "time": "7pm"}',
    '{"people": "4", "date": "friday", "time": "7pm", "first_name": "Ana", "x": [1, {"B": "c"}]}',
    "{}",
    'prose {"broken": } then {"people": "4"}',
    "no object here",
    "{not json",
    "",
]


def emery_parse(reply: str) -> Any:
    """emery's parse of ``reply``, or the ParseError it raises."""
    try:
        return ParserConfig(kind="json_object").parse(reply)
    except ParseError as exc:
        return exc


@pytest.mark.parametrize("match", ["f1", "exact"])
@pytest.mark.parametrize("reply", REPLIES)
def test_json_object_replies_score_as_emery_scores_them(reply: str, match: str) -> None:
    parsed = emery_parse(reply)
    if isinstance(parsed, ParseError):
        with pytest.raises(ValueError, match=re.escape(str(parsed))):
            scoring.parse({"kind": "json_object"}, reply)
        return
    verdict = JsonObjectMatch(match).check(Example(id="e", input={}, expected=GOLD), parsed)
    peer_output = scoring.parse({"kind": "json_object"}, reply)
    score, feedback = scoring.verify({"kind": "json_object", "match": match}, GOLD, peer_output)
    assert (score, feedback) == (pytest.approx(verdict.score), verdict.feedback)


def test_an_empty_gold_object_and_a_gold_object_given_as_json_text() -> None:
    assert scoring.verify({"kind": "json_object"}, {}, "{}")[0] == 1.0
    assert scoring.verify({"kind": "json_object"}, '{"a": "1"}', '{"a": 1}')[0] == 1.0
    assert scoring.verify({"kind": "json_object"}, {}, '{"a": 1}')[0] == 0.0


def stage(template: str) -> StageConfig:
    return StageConfig(name="extract", messages=[{"role": "user", "template": template}])


def test_a_peer_reads_the_user_turn_as_emery_renders_it() -> None:
    example = Example(id="e", input={"asked": "time", "text": "7pm"}, expected=GOLD)
    dataset = Dataset(train=[example])
    two_fields = stage("Asked for: {asked}\nCustomer: {text}")
    assert input_field(two_fields) == PEER_FIELD
    row = peer_examples(dataset, "train", two_fields)[0]
    assert row["input"] == {PEER_FIELD: "Asked for: time\nCustomer: 7pm"}
    assert row["fields"] == example.input
    just_one = stage("{text}")
    assert input_field(just_one) == "text"
    assert peer_examples(dataset, "train", just_one)[0]["input"] == {"text": "7pm"}


def test_a_peer_needs_a_stage_with_one_user_turn() -> None:
    system_turn = StageConfig(name="s", messages=[{"role": "system", "template": "{text}"}])
    with pytest.raises(SystemExit, match="one user turn"):
        input_field(system_turn)


def test_a_peer_carries_an_object_gold_output_as_json() -> None:
    carried = scoring.expected_text(GOLD)
    assert scoring.verify({"kind": "json_object"}, carried, json.dumps(GOLD))[0] == 1.0
    assert scoring.expected_text("7") == "7"


CODE_EXAMPLE = Example(
    id="add",
    input={"prompt": 'def add(a, b):\n    """The sum of a and b."""\n', "entry_point": "add"},
    expected="def check(candidate):\n    assert candidate(2, 3) == 5\n\ncheck(add)\n",
)
CODE_REPLIES = [
    "```python\ndef add(a, b):\n    return a + b\n```",
    "```python\ndef add(a, b):\n    return a - b\n```",
    "    return a + b\n",
    "Here it is: ```python\nraise SystemExit(0)\n```",
    "",
]


@pytest.mark.parametrize("reply", CODE_REPLIES)
async def test_code_replies_score_as_emery_scores_them(reply: str) -> None:
    from emery.verifiers.code_tests import CodeTests

    try:
        parsed = ParserConfig(kind="code").parse(reply)
    except ParseError as exc:
        with pytest.raises(ValueError, match=re.escape(str(exc))):
            scoring.parse({"kind": "code"}, reply)
        return
    verdict = await CodeTests().verify(CODE_EXAMPLE, parsed)
    verifier = {"kind": "code_tests", "timeout_s": 10.0, "memory_mb": 512}
    output = scoring.parse({"kind": "code"}, reply)
    fields = dict(CODE_EXAMPLE.input)
    got = await asyncio.to_thread(scoring.verify, verifier, CODE_EXAMPLE.expected, output, fields)
    assert got == (verdict.score, verdict.feedback)


def test_the_code_runner_needs_only_the_standard_library() -> None:
    """Peers load ``verifiers/code_run.py`` by path in venvs without emery."""
    source = Path(scoring.__file__).resolve().parents[3] / "src/emery/verifiers/code_run.py"
    imported = set()
    for node in ast.walk(ast.parse(source.read_text())):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}, imported
