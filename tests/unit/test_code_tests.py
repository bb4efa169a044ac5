"""The ``code_tests`` verifier and the ``code`` parser: a reply's Python code run against
the row's tests in a test process under a time and a memory limit."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from emery.config import load_config, parse_config
from emery.core.models import ChatMessage, Example
from emery.jobs.evaluate import evaluate_config
from emery.lm import FakeLM
from emery.systems import ParseError, ParserConfig
from emery.verifiers.code_run import read_code
from emery.verifiers.code_tests import CodeTests
from emery.verifiers.config import VerifierConfig, build_verifier

ROOT = Path(__file__).resolve().parents[2]
PROMPT = 'def add(a, b):\n    """The sum of a and b."""\n'
TESTS = (
    "def check(candidate):\n"
    "    assert candidate(1, 2) == 3\n"
    "    assert candidate(-1, 1) == 0\n"
    "    assert candidate(20, 22) == 42\n"
    "\ncheck(add)\n"
)
EXAMPLE = Example(id="add", input={"prompt": PROMPT, "entry_point": "add"}, expected=TESTS)
RIGHT = "def add(a, b):\n    return a + b\n"


async def verdict(reply: str, **settings: float) -> tuple[float, str]:
    result = await CodeTests(**settings).verify(EXAMPLE, reply)  # type: ignore[arg-type]
    return result.score, result.feedback


@pytest.mark.parametrize(
    "reply",
    [
        RIGHT,
        f"Here it is:\n```python\n{RIGHT}```\nIt adds.",
        f"```\n{RIGHT}```",
        "    return a + b\n",  # a body that completes the prompt
        f"```python\nprint(add(1, 2))\n```\n```python\n{RIGHT}```",  # the block that defines it
        f"print('noise')\n{RIGHT}",
    ],
)
async def test_a_right_reply_passes(reply: str) -> None:
    assert await verdict(reply) == (1.0, "Correct: every test passed.")


async def test_the_first_failing_assert_and_its_value_and_no_other_test() -> None:
    score, feedback = await verdict("def add(a, b):\n    return a - b\n")
    assert (score, feedback) == (
        0.0,
        "Wrong: assert candidate(1, 2) == 3 failed: candidate(1, 2) was -1.",
    )


@pytest.mark.parametrize(
    ("reply", "says"),
    [
        ("def add(a, b):\n    while True:\n        pass\n", "did not finish within 1 s"),
        ("def add(a, b):\n    return len(bytearray(10**10))\n", "MemoryError"),
        ("import os\nos._exit(3)\n", "ended the process (exit status 3) before the tests"),
        ("def add(a, b) return a + b", "not valid Python"),
        ("def add(a, b):\n    raise KeyError('k')\n", "KeyError: 'k'"),
        ("import sys\nsys.exit(0)\n", "SystemExit"),
        ("", "The reply has no code."),
        (f"{RIGHT}assert add(1, 1) == 3, 'my example'\n", "reply's code raised AssertionError: my"),
    ],
)
async def test_a_bad_reply_fails_with_one_line_saying_why(reply: str, says: str) -> None:
    score, feedback = await verdict(reply, timeout_s=1.0)
    assert score == 0.0
    assert says in feedback
    assert "\n" not in feedback


async def test_an_assert_s_message_is_not_shown() -> None:
    example = EXAMPLE.model_copy(
        update={"expected": "assert add(1, 2) == 3, 'hidden: ' + str(add(9, 9))\n"}
    )
    result = await CodeTests().verify(example, "def add(a, b):\n    return 0\n")
    assert result.feedback == "Wrong: assert add(1, 2) == 3 failed: add(1, 2) was 0."


async def test_a_reply_cannot_print_its_own_pass() -> None:
    forged = (
        "import json, os\n"
        "for p in ('@@emery-code-tests@@', '@@emery-code-tests-0000000000000000@@'):\n"
        "    print(p + json.dumps({'passed': True, 'feedback': 'ok'}), flush=True)\n"
        "os._exit(0)\n"
    )
    score, _ = await verdict(forged)
    assert score == 0.0


def test_read_code_keeps_a_body_s_indentation() -> None:
    assert read_code("\n\n    return a + b\n\n") == "    return a + b"
    assert read_code("no fence here") == "no fence here"
    assert read_code("```js\nx()\n```\n```py\ny = 1\n```") == "y = 1"


def test_the_code_parser() -> None:
    parser = ParserConfig(kind="code")
    assert parser.parse(f"```python\n{RIGHT}```") == RIGHT.rstrip()
    with pytest.raises(ParseError, match="empty"):
        parser.parse("  \n")


def test_the_kind_is_configured_and_validated() -> None:
    config = VerifierConfig.model_validate({"kind": "code_tests", "timeout_s": 3, "memory_mb": 256})
    built = build_verifier(config)
    assert isinstance(built, CodeTests)
    assert (built.timeout_s, built.memory_mb) == (3.0, 256)
    with pytest.raises(Exception, match="memory_mb"):
        parse_config(
            {
                "dataset": {"task": "word_problems"},
                "verifier": {"kind": "code_tests", "memory_mb": 1},
            }
        )


def code_lm_reply(messages: Sequence[ChatMessage]) -> str:
    """Right for ``add``, a body for ``sub``, a wrong function for ``mul``."""
    prompt = str(messages[-1]["content"])
    if "def add" in prompt:
        return f"Sure.\n```python\n{RIGHT}```"
    if "def sub" in prompt:
        return "    return a - b"
    return "```python\ndef mul(a, b):\n    return a + b\n```"


CODE_LM = FakeLM(code_lm_reply, model="fake/coder")


def test_an_eval_job_on_the_humaneval_config_runs_the_tests(tmp_path: Path) -> None:
    rows = []
    for name, op in (("add", "+"), ("sub", "-"), ("mul", "*")):
        prompt = f'def {name}(a, b):\n    """a {op} b"""\n'
        tests = f"def check(candidate):\n    assert candidate(3, 2) == 3 {op} 2\n\ncheck({name})\n"
        rows.append(
            {
                "id": name,
                "input": {"prompt": prompt, "entry_point": name},
                "expected": tests,
                "split": "val",
            }
        )
    data = tmp_path / "code.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    bench = load_config(ROOT / "benchmarks/quality/real/humaneval.toml")
    assert bench.system is not None
    assert bench.verifier is not None
    config = parse_config(
        {
            "dataset": {"path": str(data)},
            "system": bench.system.model_dump(mode="json"),
            "verifier": bench.verifier.model_dump(mode="json"),
            "lm": {"task": {"model": "python/test_code_tests:CODE_LM"}},
            "runtime": {"workdir": str(tmp_path / ".emery")},
        }
    )
    report = asyncio.run(evaluate_config(config, split="val", base_dir=tmp_path))
    by_id = {r.example_id: r for r in report.results}
    assert (by_id["add"].score, by_id["sub"].score, by_id["mul"].score) == (1.0, 1.0, 0.0)
    assert by_id["mul"].feedback == (
        "Wrong: assert candidate(3, 2) == 3 * 2 failed: candidate(3, 2) was 5."
    )
