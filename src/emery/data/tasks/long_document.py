"""Long-document QA: a question about one of a few facts planted in 50 000+ words of
filler, far more than a small model's context.

Each example's ``document`` is filler sentences, one per line, with ``FACTS`` facts
("The badge number of Orla Venn is 48213.") on lines drawn at random; the ``question``
asks for one of them and the gold answer is its number (verifier: ``contains``). The
filler never names a fact's person or attribute, so a search for either finds the fact.
Everything comes from the seeded ``random.Random``: the same seed gives the same
documents, and a document takes a few milliseconds to make.

The starting system is an rlm graph (``graph_type = "rlm"``): one tool node that reaches
the document through ``materialize_context``, ``local_grep`` and ``read_span``.
``stuffed_graph`` is the plain alternative: one node given the document's first
``max_chars`` characters.
"""

from __future__ import annotations

import random
from typing import Any

from emery.data.tasks.base import BuiltinTask
from emery.verifiers.kinds import ContainsConfig


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


MIN_WORDS = 50_000
FACTS = 5
BATCH = 500
ADJECTIVES = _words("quiet amber narrow heavy brisk faded hollow lively rusty gentle plain silver")
NOUNS = _words("lantern harbor ledger orchard bridge wagon meadow furnace archive canal mill tower")
VERBS = _words("inspected repaired painted measured moved cleaned counted sealed sketched guarded")
PLACES = _words("river gate north road old market east field chapel square west dock")
ROLES = _words("clerk miller warden keeper baker porter surveyor steward carter weaver")
TIMES = ("morning", "evening", "winter", "spring", "harvest", "autumn", "summer", "night")
FILLER = (
    "The {adj} {noun} near the {place} was {verb} by the {role} one {time}.",
    "Every {time} the {role} {verb} a {adj} {noun} beside the {place}.",
    "Old notes say the {noun} by the {place} stayed {adj} through the {time}.",
    "A {adj} {noun} was {verb} twice before the {role} reached the {place}.",
    "Nobody recalls why the {role} left the {adj} {noun} at the {place} that {time}.",
    "The {role} and the {adj} {noun} waited by the {place} until the {time} ended.",
)
FIRST = _words("Orla Tamsin Idris Bram Ysolde Caspian Marisol Evander Linnea Oswin Seren Thaddeus")
LAST = _words("Venn Quarrington Ashgrove Pellow Drummond Falkner Hightower Ravel Sorrel Whitlock")
ATTRIBUTES = (
    "badge number",
    "locker code",
    "permit number",
    "parcel number",
    "account pin",
    "ticket number",
    "room number",
)
RLM_INSTRUCTION = (
    "Answer the question about the document. Call materialize_context first, then search"
    " the document with local_grep for the question's key words (such as a name), read"
    " the lines around a match with read_span when needed, and reply with the answer only."
)
STUFFED_INSTRUCTION = "Answer the question about the document. Reply with the answer only."


def filler_lines(rng: random.Random, count: int) -> list[str]:
    """``count`` filler sentences (each slot drawn for all of them at once: fast)."""
    columns = [rng.choices(words, k=count) for words in (ADJECTIVES, NOUNS, VERBS, PLACES)]
    people, times = rng.choices(ROLES, k=count), rng.choices(TIMES, k=count)
    return [
        template.format(adj=adj, noun=noun, verb=verb, place=place, role=role, time=time)
        for template, adj, noun, verb, place, role, time in zip(
            rng.choices(FILLER, k=count), *columns, people, times, strict=True
        )
    ]


def planted_facts(rng: random.Random, count: int = FACTS) -> list[tuple[str, str, str]]:
    """``count`` facts as (person, attribute, value), each person and attribute once."""
    people = rng.sample([f"{first} {last}" for first in FIRST for last in LAST], count)
    attributes = rng.sample(ATTRIBUTES, count)
    return [
        (p, a, str(rng.randint(10_000, 99_999))) for p, a in zip(people, attributes, strict=True)
    ]


def document(rng: random.Random, facts: list[tuple[str, str, str]]) -> str:
    """At least ``MIN_WORDS`` words of filler lines with each fact on a line of its own."""
    lines: list[str] = []
    words = 0
    while words < MIN_WORDS:
        batch = filler_lines(rng, BATCH)
        lines += batch
        words += sum(line.count(" ") + 1 for line in batch)
    for person, attribute, value in facts:
        lines.insert(rng.randrange(len(lines) + 1), f"The {attribute} of {person} is {value}.")
    return "\n".join(lines)


def generate(rng: random.Random) -> tuple[dict[str, Any], Any]:
    facts = planted_facts(rng)
    person, attribute, value = rng.choice(facts)
    question = f"What is the {attribute} of {person}?"
    return {"document": document(rng, facts), "question": question}, value


def rlm_graph() -> dict[str, Any]:
    """The task's starting system: one rlm tool node over ``document``."""
    return {
        "kind": "graph",
        "name": "long_document_rlm",
        "graph_type": "rlm",
        "rlm": {
            "context": "document",
            "max_tool_calls": 6,
            "max_matches": 10,
            "max_span_lines": 10,
        },
        "nodes": [
            {
                "kind": "llm",
                "name": "answer",
                "instruction": RLM_INSTRUCTION,
                "messages": [{"role": "user", "template": "Question: {question}"}],
                "max_tokens": 128,
            },
            {"kind": "output", "value": "answer"},
        ],
    }


def stuffed_graph(max_chars: int) -> dict[str, Any]:
    """The plain alternative: one node given the document's first ``max_chars`` characters."""
    head = f"def head(document):\n    return document[:{int(max_chars)}]\n"
    return {
        "kind": "graph",
        "name": "long_document_stuffed",
        "nodes": [
            {"kind": "code", "name": "head", "source": head},
            {
                "kind": "llm",
                "name": "answer",
                "instruction": STUFFED_INSTRUCTION,
                "messages": [
                    {"role": "user", "template": "Document:\n{head}\n\nQuestion: {question}"}
                ],
                "max_tokens": 64,
            },
            {"kind": "output", "value": "answer"},
        ],
    }


TASK = BuiltinTask(
    name="long_document_qa",
    description=(
        "Answer a question about one fact planted in a document of 50 000+ words,"
        " far longer than the model's context. Reply with the answer only."
    ),
    generate=generate,
    program=None,
    verifier=ContainsConfig(),
    sizes=(10, 10, 30),
    system=rlm_graph(),
)
