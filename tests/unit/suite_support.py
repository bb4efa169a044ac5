"""A scripted model for the quality suite's unit test (``python/suite_support:scripted_lm``).

Word problems (seed 0) are answered right exactly when the gold answer is even
(``fake_models.fake_answer``); a lone lower-case word is repeated in capitals when its length
is even; anything else (a reflection or proposer prompt) gets one fixed instruction.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from fake_models import fake_answer, word_problem_answers

from emery.core.models import ChatMessage
from emery.lm import FakeLM

WORDS = [
    "apple", "river", "stone", "cloud", "tiger", "maple", "ocean", "piano",
    "lemon", "frost", "amber", "cedar", "delta", "ember", "flint", "grove",
    "haven", "ivory", "jolly", "koala", "lunar", "mango", "noble", "olive",
    "pearl", "quilt", "raven", "sable", "tulip", "umbra", "vivid", "waltz",
    "bee", "cat", "dove", "elk", "fox", "gnu", "hare", "ibis",
]  # fmt: skip


def _reply(messages: Sequence[ChatMessage]) -> str:
    last = messages[-1]["content"]
    if last in word_problem_answers():
        return f"Let me think.\nAnswer: {fake_answer(last)}"
    if last.isalpha() and last.islower():
        return last.upper() if len(last) % 2 == 0 else last
    return "Repeat the word in capital letters."


def scripted_lm() -> FakeLM:
    return FakeLM(_reply, model="fake/suite")


def words_config(directory: Path) -> Path:
    """A job config over a JSONL of words to repeat in capitals, with an expert prompt."""
    rows = [
        {"id": f"w{i}", "input": {"word": word}, "expected": word.upper()}
        for i, word in enumerate(WORDS)
    ]
    (directory / "words.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    config = directory / "words.toml"
    config.write_text(
        """[job]
name = "words"
[job.budget]
metric_calls = 999
[dataset]
path = "words.jsonl"
n_train = 10
n_val = 7
[system]
kind = "prompt_program"
[[system.stages]]
name = "say"
instruction = "Repeat the word."
messages = [{ role = "user", template = "{word}" }]
parser = { kind = "last_line" }
[verifier]
kind = "exact"
[references.expert]
say = "Repeat the word in capital letters."
"""
    )
    return config
