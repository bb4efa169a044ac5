"""rlm graphs: a tool node answers over a document longer than the model's context through
materialize_context, local_grep and read_span; the stuffed one-node graph cannot."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from lift_support import assert_test_lift

import emery
from emery.core.errors import ConfigError
from emery.core.models import ChatMessage, Example
from emery.data.tasks import builtin_task
from emery.data.tasks.long_document import stuffed_graph
from emery.evaluation import Evaluator
from emery.lm import FakeLM
from emery.store import MemoryStore
from emery.store.records import NewJob
from emery.systems.base import RunContext, SystemRun
from emery.systems.graph.system import GraphSystem, llm_calls
from emery.systems.graph.workspace import ContextWorkspace
from emery.systems.registry import build_system, parse_system_config
from emery.tracing.store_recorder import StoreRecorder, load_spans
from emery.verifiers import build_verifier

CONTEXT_WORDS = 2_000
"""The scripted model's context, in words (FakeLM counts words as tokens)."""
QUESTION = re.compile(r"What is the (.+?) of (.+?)\?")


def words(messages: Sequence[ChatMessage]) -> int:
    return sum(len(m["content"].split()) for m in messages)


def tool(name: str, **arguments: Any) -> str:
    return json.dumps({"tool": name, "arguments": arguments})


def reader(messages: Sequence[ChatMessage]) -> str:
    """A careful reader with a small context: with tools it materializes the context, greps
    for the person the question names, reads the span around the first hit and answers
    from what it read; without tools it answers from the document in its prompt."""
    assert words(messages) < CONTEXT_WORDS, "the prompt overflows the model's context"
    text = "\n".join(m["content"] for m in messages)
    match = QUESTION.search(text)
    assert match is not None
    attribute, person = match.groups()
    last = messages[-1]["content"]
    fact = re.search(
        rf"The {attribute} of {person} is (\d+)", last if "local_grep" in text else text
    )
    if "local_grep" not in messages[0]["content"]:
        return fact.group(1) if fact else "I cannot find it in the document."
    if last.startswith("read_span result") and fact:
        return fact.group(1)
    if not any(m["content"].startswith("materialize_context result") for m in messages):
        return tool("materialize_context")
    if last.startswith("local_grep result"):
        hit = re.search(r"^(\d+): ", last, re.MULTILINE)
        if hit:
            line = int(hit.group(1))
            return tool("read_span", start=line - 1, end=line + 1)
    return tool("local_grep", pattern=person)


def task_examples(n: int) -> list[Example]:
    return builtin_task("long_document_qa").dataset(seed=3, n_train=0, n_val=0, n_test=n).test


def rlm_system() -> GraphSystem:
    system = build_system(parse_system_config(builtin_task("long_document_qa").system or {}))
    assert isinstance(system, GraphSystem)
    return system


async def run(system: GraphSystem, lm: Any, example: Example) -> SystemRun:
    return await system.run(system.seed_candidate(), RunContext(lm=lm, example=example))


async def test_rlm_graph_answers_planted_facts_the_stuffed_graph_cannot_see() -> None:
    examples = task_examples(3)
    verifier = build_verifier(builtin_task("long_document_qa").verifier)
    max_chars = 6_000  # what fits the context with the instruction and question
    stuffed = build_system(parse_system_config(stuffed_graph(max_chars)))
    assert isinstance(stuffed, GraphSystem)
    for example in examples:
        document = example.input["document"]
        assert len(document.split()) >= 50_000 > CONTEXT_WORDS
        assert document.index(f"is {example.expected}.") > max_chars  # beyond the head
        lm = FakeLM(reader)
        got = await run(rlm_system(), lm, example)
        assert got.error is None
        assert (await verifier.verify(example, got.output)).score == 1.0
        assert 4 <= len(lm.calls) <= 6
        assert max(words(call) for call in lm.calls) < CONTEXT_WORDS
        plain_lm = FakeLM(reader)
        plain = await run(stuffed, plain_lm, example)
        assert plain.error is None
        assert (await verifier.verify(example, plain.output)).score == 0.0
        assert max(words(call) for call in plain_lm.calls) < CONTEXT_WORDS


async def test_tool_calls_are_spans_and_the_transcript_is_the_node_call() -> None:
    store = MemoryStore()
    job = store.create_job(
        NewJob(id="job-r", name="t", algorithm="baseline", config={"dataset": {"task": "x"}})
    )
    system = rlm_system()
    verifier = build_verifier(builtin_task("long_document_qa").verifier)
    evaluator = Evaluator(
        system, verifier, FakeLM(reader), recorder=StoreRecorder(store, job.id), job_id=job.id
    )
    result = await evaluator.evaluate(system.seed_candidate(), task_examples(1), "val")
    assert result.scores == [1.0]
    spans = load_spans(store, result.results[0].rollout_id or "")
    node = next(s for s in spans if s.attributes.get("emery.node.name") == "answer")
    tools = [s for s in spans if s.name.startswith("execute_tool")]
    assert [s.name for s in tools] == [
        "execute_tool materialize_context",
        "execute_tool local_grep",
        "execute_tool read_span",
    ]
    assert all(s.parent_id == node.span_id for s in tools)
    (call,) = result.results[0].calls
    assert call.component == "answer"
    assert [m["role"] for m in call.messages][-2:] == ["assistant", "user"]
    assert call.messages[-1]["content"].startswith("read_span result")


async def test_tool_errors_come_back_as_observations() -> None:
    replies = [
        tool("local_grep", pattern="Orla"),  # before materialize_context: it loads it first
        tool("materialize_context"),
        tool("local_grep", pattern="(unclosed"),
        tool("read_span", start=0, end=3),
        tool("read_span", start="ten"),
        tool("shell", command="ls"),
        tool("submit", answer="12345"),
    ]
    lm = FakeLM(replies)
    example = task_examples(1)[0]
    got = await run(rlm_system(), lm, example)
    assert got.error is None
    assert got.output == "12345"
    observations = [call[-1]["content"] for call in lm.calls[1:]]
    assert observations[0].startswith("local_grep result:\ncontext materialized:")
    assert observations[0].endswith("no line matches 'Orla'")  # it searched the loaded text
    assert observations[1].startswith("materialize_context result:\ncontext materialized:")
    assert "ERROR: bad regex '(unclosed'" in observations[2]
    assert "ERROR: bad span 0..3: the context has lines 1.." in observations[3]
    assert "ERROR: read_span needs whole line numbers" in observations[4]
    assert "ERROR: unknown tool 'shell'" in observations[5]


def budget_system(max_tool_calls: int) -> GraphSystem:
    spec = builtin_task("long_document_qa").system or {}
    spec = {**spec, "rlm": {"context": "document", "max_tool_calls": max_tool_calls}}
    system = build_system(parse_system_config(spec))
    assert isinstance(system, GraphSystem)
    return system


async def test_the_tool_budget_bounds_the_calls_and_fails_the_node() -> None:
    system = budget_system(2)
    lm = FakeLM(lambda messages: tool("local_grep", pattern="x"))
    got = await run(system, lm, task_examples(1)[0])
    assert got.error == "node 'answer': no answer within max_tool_calls=2"
    assert len(lm.calls) == 4  # two tools, one more asked for, the answer from notes
    assert llm_calls(system.graph) == 4  # the bound target_llm_calls sees
    assert "The tool budget is spent" in lm.calls[-1][-1]["content"]


async def test_past_the_budget_the_model_answers_from_notes_without_the_protocol() -> None:
    """A model that calls tools while the protocol is in view still answers at the end."""

    def reply(messages: Sequence[ChatMessage]) -> str:
        if "To call a tool" in messages[0]["content"]:
            return tool("local_grep", pattern="x")
        return "12345"

    lm = FakeLM(reply)
    got = await run(budget_system(2), lm, task_examples(1)[0])
    assert got.error is None
    assert got.output == "12345"
    final = lm.calls[-1]
    assert len(lm.calls) == 4
    assert not any("To call a tool" in m["content"] for m in final)
    assert final[-1]["content"].count("local_grep result:") == 2  # both results, as notes
    assert final[-1]["content"].endswith("Reply now with the final answer only.")


async def test_the_instruction_is_a_component_the_model_sees() -> None:
    system = rlm_system()
    seed = system.seed_candidate()
    assert list(seed.components) == ["answer"]
    child = seed.model_copy(update={"components": {"answer": "Grep for the name first."}})
    lm = FakeLM(["42"])
    await system.run(child, RunContext(lm=lm, example=task_examples(1)[0]))
    first = lm.calls[0][0]["content"]
    assert first.startswith("Grep for the name first.\n\nThe input document is too long")
    assert "local_grep(pattern: a Python regular expression)" in first


def rlm_spec(**changes: Any) -> dict[str, Any]:
    return {**(builtin_task("long_document_qa").system or {}), **changes}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (rlm_spec(rlm=None), "graph_type = 'rlm' needs [system.rlm] with 'context'"),
        (rlm_spec(graph_type="policy"), "'rlm' options are only for graph_type = 'rlm'"),
        (
            rlm_spec(rlm={"context": "document", "nodes": ["solve"]}),
            "rlm.nodes: 'solve' is not an llm node (llm nodes: answer)",
        ),
        (
            rlm_spec(rlm={"context": "question"}),
            "rlm node 'answer' puts the context {question} in its prompt",
        ),
    ],
)
def test_a_bad_rlm_graph_is_a_one_line_config_error(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        build_system(parse_system_config(spec))
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_the_context_must_be_an_input_field_and_stay_out_of_candidate_prompts() -> None:
    system = rlm_system()
    with pytest.raises(ConfigError, match=r"rlm.context 'document' is not an input field"):
        system.check_inputs({"question"})
    system.check_inputs({"question", "document"})
    seed = system.seed_candidate()
    leaky = seed.model_copy(update={"components": {"answer": "Read {document}."}})
    with pytest.raises(ConfigError, match=r"puts the context \{document\} in its prompt"):
        system.check_candidate(leaky, {"question", "document"})


def test_what_one_search_or_read_shows_is_bounded() -> None:
    text = "\n".join(f"row {i} " + "x" * (500 if i == 7 else 10) for i in range(1, 101))
    workspace = ContextWorkspace(text, max_matches=3, max_span_lines=4)
    assert workspace.execute({"tool": "materialize_context"}).text.startswith(
        "context materialized: 100 lines, 300 words."
    )
    grep = workspace.execute({"tool": "local_grep", "arguments": {"pattern": r"row \d+ x"}})
    assert grep.ok
    assert grep.text.splitlines() == [
        "100 matching lines:",
        "1: row 1 xxxxxxxxxx",
        "2: row 2 xxxxxxxxxx",
        "3: row 3 xxxxxxxxxx",
        "(97 more matching lines not shown)",
    ]
    span = workspace.execute({"tool": "read_span", "arguments": {"start": 6, "end": 99}})
    lines = span.text.splitlines()
    assert lines[0] == "lines 6-9 of 100:"
    assert len(lines) == 5
    assert lines[2].endswith(" ...")
    assert len(lines[2]) < 320
    last = workspace.execute({"tool": "read_span", "arguments": {"start": "100"}})
    assert last.text.splitlines() == ["lines 100-100 of 100:", "100: row 100 xxxxxxxxxx"]
    none = workspace.execute({"tool": "local_grep", "arguments": {"pattern": "zzz"}})
    assert none.ok
    assert none.text == "no line matches 'zzz'"


def lazy_reader(messages: Sequence[ChatMessage]) -> str:
    """``reader`` when its instruction tells it to search the document; otherwise it
    answers at once, without the tools, and cannot know."""
    if "Search the document" not in messages[0]["content"]:
        return "I do not know."
    return reader(messages)


def test_gepa_rewrites_the_rlm_instruction_and_lifts_test(tmp_path: Path) -> None:
    spec = rlm_spec(
        nodes=[
            {
                "kind": "llm",
                "name": "answer",
                "instruction": "Answer the question.",
                "messages": [{"template": "Question: {question}"}],
            },
            {"kind": "output", "value": "answer"},
        ]
    )
    data = builtin_task("long_document_qa").dataset(seed=5, n_train=3, n_val=2, n_test=3)
    proposer = FakeLM(
        lambda messages: "```\nSearch the document for the person's name, then answer.\n```"
    )
    result = emery.optimize(
        spec,
        data,
        algorithm="gepa",
        budget=30,
        lm=FakeLM(lazy_reader, model="fake/lazy-reader"),
        reflection_lm=proposer,
        runtime={"workdir": str(tmp_path / ".emery")},
        store=MemoryStore(),
        progress=False,
    )
    best = assert_test_lift(result, 0.0, 1.0)
    assert result.best_test is not None
    assert result.best_test.lm_calls == 4.0  # materialize, grep, read, answer
    assert best.components["answer"].startswith("Search the document")
