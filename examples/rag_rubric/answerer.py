"""A retrieval-augmented answerer over a small employee handbook, as an emery function agent.

`retrieve` ranks the handbook's passages by the words they share with the question (no
index, no embeddings: a dozen passages); `answer` puts the best two in the prompt and asks
the job's task model. The prompt template `ANSWER` is the component GEPA rewrites; the
retrieval is recorded as a tool span of the rollout, next to the model call, so the
reflection sees which passages the model was given.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import emery

HANDBOOK = [
    json.loads(line)
    for line in Path(__file__).with_name("handbook.jsonl").read_text(encoding="utf-8").splitlines()
    if line.strip()
]
QUESTION_WORDS = (
    "a an the of to in on for and or is are be do does i my we our how what when who which"
    " can must should much many long far"
)
STOPWORDS = frozenset(QUESTION_WORDS.split())

ANSWER = emery.PromptTemplate(
    "Answer the question with the handbook passages below.\n\n{passages}\n\nQuestion: {question}"
)


def words(text: str) -> set[str]:
    """The text's content words, crudely stemmed ("trains", "claimed": "train", "claim")."""
    found = re.findall(r"[a-z0-9]+", text.lower())
    return {re.sub(r"(?<=\w{3})(ed|s)$", "", w) for w in found if w not in STOPWORDS}


def retrieve(question: str, k: int = 2) -> list[dict[str, str]]:
    """The ``k`` passages sharing the most words with the question (section title included)."""
    asked = words(question)
    ranked = sorted(
        HANDBOOK,
        key=lambda p: len(asked & words(p["section"] + " " + p["text"])),
        reverse=True,
    )
    return ranked[:k]


@emery.agent
def answer(question: str, lm: Any) -> str:
    """Retrieve, then answer from the retrieved passages."""
    with emery.tool_call("search_handbook", {"question": question}) as call:
        passages = retrieve(question)
        if call is not None:
            call.result([p["section"] for p in passages])
    context = "\n".join(f"[{p['section']}] {p['text']}" for p in passages)
    reply: str = lm(ANSWER.format(passages=context, question=question))
    return reply.strip()


if __name__ == "__main__":
    import sys

    for passage in retrieve(" ".join(sys.argv[1:]) or "How long is parental leave?"):
        print(f"[{passage['section']}] {passage['text']}")
