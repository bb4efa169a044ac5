"""examples/openai_agent (the plain ``openai`` client) and examples/openai_agents_sdk (the
OpenAI Agents SDK), served as task apps with no change to their code, are optimized
through the LM proxy with the scripted models of the LangGraph example's test (the gold
label only under instructions that list the labels); their OpenAI calls are traced."""

from __future__ import annotations

from pathlib import Path

import pytest
from examples_support import copy_example, input_messages, train_example

from emery.core.imports import import_object
from emery.proxy import BackgroundServer, free_port
from emery.systems.function_agent import FunctionAgent
from emery.taskapp import create_task_app
from emery.tracing import conventions as sc

# A task app and the LM proxy on real ports and a search through them (seconds each; the
# Agents SDK takes a few to import): make test runs them, make check leaves them out.
pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    ("example", "component"),
    [("openai_agent", "SYSTEM_PROMPT"), ("openai_agents_sdk", "INSTRUCTIONS")],
)
def test_the_agent_is_optimized_through_the_proxy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, example: str, component: str
) -> None:
    folder = copy_example(example, tmp_path, monkeypatch)
    # Where the agent's client would go without emery: nothing listens there.
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{free_port()}/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "not-used")
    monkeypatch.setenv("OPENAI_AGENTS_DISABLE_TRACING", "1")  # the SDK's own export
    agent = FunctionAgent(import_object("support_agent:classify"), components=[component])
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
    best = result.best_candidate.components[component]
    assert "one of these labels" in best
    assert result.best_test is not None
    assert result.best_test.mean == 1.0
    calls = trained.spans()
    assert len(calls) == trained.rollout_count()  # one model call per run of the agent
    for span in calls:
        assert span.attributes[sc.LM_SOURCE] == "proxy"
        assert span.attributes[sc.GEN_AI_RESPONSE_MODEL] == "fake/intent"
    prompts = {input_messages(s)[0]["content"] for s in calls}
    assert prompts == {import_object(f"support_agent:{component}"), best}
