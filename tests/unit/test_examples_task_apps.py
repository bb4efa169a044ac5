"""The task-app examples (examples/langgraph_agent: LangGraph with langchain-openai;
examples/openai_agent: the plain ``openai`` client; examples/openai_agents_sdk: the OpenAI
Agents SDK), served as task apps with no change to their code, are optimized through the
LM proxy with scripted models; their model calls are traced."""

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

# A task app and the LM proxy on real ports, the agent's framework imported and a search
# run through them (seconds each): make test runs them, make check leaves them out.
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


@pytest.mark.parametrize(
    ("example", "agent", "component"),
    [
        ("langgraph_agent", "triage:triage", "CLASSIFY_PROMPT"),
        ("openai_agent", "support_agent:classify", "SYSTEM_PROMPT"),
        ("openai_agents_sdk", "support_agent:classify", "INSTRUCTIONS"),
    ],
)
def test_the_agent_is_optimized_through_the_proxy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, example: str, agent: str, component: str
) -> None:
    folder = copy_example(example, tmp_path, monkeypatch)
    # Where the agent's client would go without emery: nothing listens there.
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{free_port()}/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "not-used")
    monkeypatch.setenv("OPENAI_AGENTS_DISABLE_TRACING", "1")  # the Agents SDK's own export
    served = FunctionAgent(import_object(agent), components=[component])
    with BackgroundServer(create_task_app(served)) as app:
        trained = train_example(
            folder,
            system__base_url=app.url,
            job__budget__metric_calls=24,
            dataset__n_train=4,
            dataset__n_val=4,
            dataset__n_test=4,
            lm__task__model="python/test_examples_task_apps:TASK_LM",
            lm__reflection__model="python/test_examples_task_apps:REFLECTION_LM",
        )
    result = trained.result
    assert result.baseline_val == 0.0
    assert result.best_val == 1.0
    assert result.best_candidate is not None
    best = result.best_candidate.components[component]
    assert "one of these labels" in best
    assert result.best_test is not None
    assert result.best_test.mean == 1.0
    calls = trained.spans()
    assert len(calls) == trained.rollout_count()  # one model call per run of the agent
    for span in calls:
        assert span.attributes[sc.LM_SOURCE] == "proxy"
        assert span.attributes[sc.GEN_AI_RESPONSE_MODEL] == "fake/intent"
        assert input_messages(span)[0]["role"] == "system"
    seed = import_object(f"{agent.partition(':')[0]}:{component}")
    assert seed.startswith("Classify the intent of the customer's message. Reply with one label")
    assert {input_messages(s)[0]["content"] for s in calls} == {seed, best}
