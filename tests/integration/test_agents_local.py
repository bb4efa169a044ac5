"""Agents on the real local model (SmolLM2-135M): a function agent in process, and a plain
OpenAI SDK agent served as a task app whose calls reach the model through the LM proxy."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from emery.core.models import Example
from emery.data.tasks import builtin_task
from emery.evaluation import Evaluator
from emery.lm import LMConfig, UsageMeter, build_lm
from emery.proxy import BackgroundServer
from emery.systems.function_agent import FunctionAgent, PromptTemplate, agent
from emery.systems.task_app import TaskApp, TaskAppConfig
from emery.taskapp import create_task_app
from emery.tracing import MemoryRecorder, RolloutConfig, emit_reward
from emery.tracing import conventions as sc
from emery.tracing.adapters import to_messages
from emery.verifiers import build_verifier
from emery.verifiers.config import VerifierConfig

pytestmark = pytest.mark.integration

MODEL = "local/smollm2-135m"
CLASSIFY = PromptTemplate("Reply with one word: the intent label of the customer's message.")
SYSTEM_PROMPT = "Classify the intent of the customer's message in one word."


def examples(n: int) -> list[Example]:
    return builtin_task("intent").dataset(n_train=0, n_val=0, n_test=n).test


def task_lm() -> Any:
    config = LMConfig(model=MODEL, max_tokens=12, n_ctx=1024, cache=False)
    return build_lm(config, role="task", meter=UsageMeter(), cache=None)


@agent
def classifier(task: dict[str, Any], lm: Any, example: Example) -> str:
    reply: str = lm(task["message"], system=CLASSIFY.text)
    emit_reward(1.0 if str(example.expected) in reply.lower() else 0.0)
    return reply


def plain_openai_classify(message: str) -> str:
    client = openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="unused")  # redirected
    reply = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": message},
        ],
        max_tokens=12,
        stream=True,
    )
    return "".join(chunk.choices[0].delta.content or "" for chunk in reply if chunk.choices)


async def test_function_agent_on_the_local_model() -> None:
    recorder = MemoryRecorder()
    system = FunctionAgent(classifier)
    verifier = build_verifier(VerifierConfig(kind="normalized"))
    ev = Evaluator(system, verifier, task_lm(), recorder=recorder, concurrency=3)
    result = await ev.evaluate(system.seed_candidate(), examples(3), "test")
    for res in result.results:
        assert res.error is None
        assert res.rollout_status == "succeeded"
        assert res.score in (0.0, 1.0)
        root, chat, reward = recorder.spans(res.rollout_id)
        assert chat.attributes[sc.GEN_AI_RESPONSE_MODEL] == MODEL
        assert chat.attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] > 0
        assert reward.attributes[sc.REWARD_VALUE] == res.score
        assert to_messages([root, chat, reward])[-1]["content"] == res.output


async def test_plain_openai_agent_as_a_task_app_through_the_proxy() -> None:
    served = agent(components=["SYSTEM_PROMPT"])(plain_openai_classify)
    recorder = MemoryRecorder()
    with BackgroundServer(create_task_app(served, api_key="k")) as app:
        system = TaskApp(TaskAppConfig(base_url=app.url, api_key="k"))
        system.check_inputs({"message"})
        verifier = build_verifier(VerifierConfig(kind="normalized"))
        ev = Evaluator(
            system,
            verifier,
            task_lm(),
            recorder=recorder,
            concurrency=3,
            rollouts=RolloutConfig(timeout_seconds=120, max_attempts=2),
        )
        result = await ev.evaluate(system.seed_candidate(), examples(3), "test")
    for res in result.results:
        assert res.error is None, res.error
        assert res.lm_calls == 1
        assert isinstance(res.output, str)
        assert res.output.strip()
        root, chat = recorder.spans(res.rollout_id)
        assert chat.parent_id == root.span_id
        assert chat.attributes[sc.LM_SOURCE] == "proxy"
        assert chat.attributes[sc.LM_STREAM] is True
        assert chat.attributes[sc.GEN_AI_RESPONSE_MODEL] == MODEL
        assert SYSTEM_PROMPT in chat.attributes[sc.GEN_AI_INPUT_MESSAGES]
        recorded = json.loads(chat.attributes[sc.GEN_AI_OUTPUT_MESSAGES])[0]["content"]
        assert recorded == res.output  # the whole streamed reply
