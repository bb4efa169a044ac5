"""examples/rag_rubric: a retrieval-augmented function agent scored by a rubric judge; the
judge's reasons lead GEPA to a prompt that cites the handbook section."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

import pytest
from examples_support import EXAMPLES, copy_example, input_messages, train_example

from emery.core.models import ChatMessage
from emery.lm import FakeLM
from emery.tracing import conventions as sc

ROWS = [
    json.loads(line)
    for line in (EXAMPLES / "rag_rubric" / "questions.jsonl").read_text().splitlines()
]
BY_QUESTION = {row["question"]: row for row in ROWS}
CITE = "Answer in one sentence, then the section you used in square brackets."
CHATTER = "Let me know if there is anything else I can help with!"


def _answer(messages: Sequence[ChatMessage]) -> str:
    """The reference answer; followed by chatter unless the prompt asks for one sentence
    and the section, and then by its section in brackets (when it was retrieved)."""
    prompt = messages[-1]["content"]
    row = next(r for q, r in BY_QUESTION.items() if f"Question: {q}" in prompt)
    section = row["meta"]["section"]
    if CITE not in prompt:
        return f"{row['expected']} {CHATTER}"
    return f"{row['expected']} [{section}]" if f"[{section}]" in prompt else row["expected"]


def _block(prompt: str, title: str) -> str:
    return prompt.split(f"## {title}\n", 1)[1].split("\n\n", 1)[0].strip()


def _judge(messages: Sequence[ChatMessage]) -> str:
    prompt = messages[-1]["content"]
    answer, reference = _block(prompt, "Answer"), _block(prompt, "Reference answer")
    cites = re.search(r"\[[A-Z][\w ]*\]$", answer) is not None
    scores = {
        "correct": {"score": int(reference in answer), "reason": "Same facts as the reference."},
        "cites": {
            "score": int(cites),
            "reason": "Cites its section." if cites else "It names no section in brackets.",
        },
        "concise": {
            "score": int(CHATTER not in answer),
            "reason": "It adds a closing line." if CHATTER in answer else "Brief.",
        },
    }
    return json.dumps({"criteria": scores})


def _reflect(messages: Sequence[ChatMessage]) -> str:
    prompt = messages[-1]["content"]
    rule = f" {CITE}" if "names no section in brackets" in prompt else ""
    return (
        "```\nAnswer the question with the handbook passages below."
        f"{rule}\n\n{{passages}}\n\nQuestion: {{question}}\n```"
    )


TASK_LM = FakeLM(_answer, model="fake/handbook")
JUDGE_LM = FakeLM(_judge, model="fake/rubric-judge")
REFLECTION_LM = FakeLM(_reflect, model="fake/cite-reflection")


def test_the_rubric_judge_leads_the_answerer_to_cite_its_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = copy_example("rag_rubric", tmp_path, monkeypatch)
    trained = train_example(
        folder,
        job__budget__metric_calls=40,
        lm__task__model="python/test_examples_rag:TASK_LM",
        lm__judge={"model": "python/test_examples_rag:JUDGE_LM"},
        lm__reflection__model="python/test_examples_rag:REFLECTION_LM",
    )
    result = trained.result
    assert result.baseline_val == 0.5  # correct (weight 2 of 4), neither cited nor concise
    assert result.best_val == 1.0
    assert result.best_test is not None
    assert result.best_test.mean == 1.0
    assert result.seed_candidate is not None
    assert result.best_candidate is not None
    seed_feedback = trained.feedback(result.seed_candidate.id)
    assert seed_feedback
    assert all("names no section in brackets" in f for f in seed_feedback)
    assert all("adds a closing line" in f for f in seed_feedback)
    assert CITE in result.best_candidate.components["ANSWER"]
    assert result.usage["judge"].calls > 0
    # Every run retrieved before it asked the model, and the model saw the passages found.
    searches = trained.spans("execute_tool")
    calls = trained.spans()
    assert len(searches) == len(calls) == trained.rollout_count()
    for search, call in zip(
        sorted(searches, key=lambda s: s.rollout_id),
        sorted(calls, key=lambda s: s.rollout_id),
        strict=True,
    ):
        sections = json.loads(search.attributes[sc.GEN_AI_TOOL_CALL_RESULT])
        prompt = input_messages(call)[-1]["content"]
        question = prompt.rsplit("Question: ", 1)[1]
        assert BY_QUESTION[question]["meta"]["section"] in sections
        assert all(f"[{section}]" in prompt for section in sections)
