"""examples/langgraph_agent: the LangGraph triage agent, served as a task app, is optimized
through the LM proxy with scripted models; its langchain-openai calls are traced."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import pytest
from examples_support import copy_example, input_messages, train_example

from emery.core.imports import import_object
from emery.core.models import ChatMessage
from emery.data.tasks.intent import LABELS, UTTERANCES
from emery.lm import FakeLM
from emery.proxy import BackgroundServer, free_port
from emery.systems.function_agent import FunctionAgent
from emery.taskapp import create_task_app
from emery.tracing import conventions as sc

# A task app and the LM proxy on real ports, LangGraph imported and a search run through
# them (about 10 s): make test runs it, the edit loop (make check) leaves it out.
pytestmark = pytest.mark.slow

LABEL_LIST = ", ".join(LABELS)
PATTERNS = {
    label: [re.compile(re.sub(r"\\\{\w+\\\}", ".+", re.escape(t)) + "$") for t in templates]
    for label, templates in UTTERANCES.items()
}


def intent_of(message: str) -> str:
    return next(label for label, ps in PATTERNS.items() if any(p.match(message) for p in ps))


def _classify(messages: Sequence[ChatMessage]) -> str:
    system = " ".join(m["content"] for m in messages if m["role"] == "system")
    label = intent_of(messages[-1]["content"])
    if "one of these labels" in system:
        return label
    return f"The customer wants help: {label.split('_')[0]}."  # a sentence, not a label


def _reflect(messages: Sequence[ChatMessage]) -> str:
    return f"```\nReply with one of these labels only: {LABEL_LIST}.\n```"


TASK_LM = FakeLM(_classify, model="fake/intent")
"""Gives the gold label only when the system prompt says "one of these labels" (the
examples' seeds list the labels in other words), else a sentence."""
REFLECTION_LM = FakeLM(_reflect, model="fake/label-reflection")


def test_the_langgraph_agent_is_optimized_through_the_proxy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = copy_example("langgraph_agent", tmp_path, monkeypatch)
    # Where the agent's client would go without emery: nothing listens there.
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{free_port()}/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "not-used")
    agent = FunctionAgent(import_object("triage:triage"), components=["CLASSIFY_PROMPT"])
    with BackgroundServer(create_task_app(agent)) as app:
        trained = train_example(
            folder,
            system__base_url=app.url,
            job__budget__metric_calls=24,
            dataset__n_train=4,
            dataset__n_val=4,
            dataset__n_test=4,
            lm__task__model="python/test_examples_langgraph:TASK_LM",
            lm__reflection__model="python/test_examples_langgraph:REFLECTION_LM",
        )
    result = trained.result
    assert result.baseline_val == 0.0
    assert result.best_val == 1.0
    assert result.best_candidate is not None
    assert "one of these labels" in result.best_candidate.components["CLASSIFY_PROMPT"]
    assert result.best_test is not None
    assert result.best_test.mean == 1.0
    calls = trained.spans()
    assert len(calls) == trained.rollout_count()  # one model call per run of the graph
    for span in calls:
        assert span.attributes[sc.LM_SOURCE] == "proxy"
        assert span.attributes[sc.GEN_AI_RESPONSE_MODEL] == "fake/intent"
        system = input_messages(span)[0]
        assert system["role"] == "system"
    prompts = {input_messages(s)[0]["content"] for s in calls}
    seed = import_object("triage:CLASSIFY_PROMPT")
    assert seed.startswith("Classify the intent of the customer's message. Reply with one label")
    assert prompts == {seed, result.best_candidate.components["CLASSIFY_PROMPT"]}
