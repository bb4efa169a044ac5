"""RL rows from traces: token ids and log-probabilities recorded by the traced LM (behind
``record_tokens``) survive the store; the credit policies; selecting one agent's calls."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from emery.core.models import Example
from emery.evaluation import Evaluator
from emery.lm import FakeLM, MeteredLM, UsageMeter
from emery.lm.config import LMConfig, build_lm
from emery.lm.tokens import TokenRecordingLM
from emery.store import MemoryStore
from emery.store.records import NewJob
from emery.systems.function_agent import FunctionAgent, agent
from emery.tracing import SpanRecord, emit_reward
from emery.tracing import conventions as sc
from emery.tracing.agents import as_agent
from emery.tracing.store_recorder import StoreRecorder, load_spans
from emery.tracing.trajectories import (
    agent_named,
    credit_policy,
    credited_calls,
    discounted,
    per_step,
    same,
    uses_component,
)
from emery.verifiers import ExactMatch

PLANNER = "You plan: list the steps for {question}"


@agent
async def two_agents(task: dict[str, Any], lm: Any) -> str:
    """A planner and a solver; the agent rewards the plan, then the two solver calls."""
    with as_agent("planner"):
        plan = await lm.acall(PLANNER.format(question=task["q"]))
    emit_reward(0.25)
    with as_agent("solver"):
        draft = await lm.acall(f"solve {plan}")
        emit_reward(0.5)
        emit_reward(0.25)  # two rewards after one call add up
        return str(await lm.acall(f"check {draft}"))


def fake() -> FakeLM:
    return FakeLM(lambda m: "step one" if "plan" in m[-1]["content"] else "42", model="fake/m")


async def episode(lm: Any, store: MemoryStore) -> tuple[Any, list[SpanRecord]]:
    job = store.create_job(NewJob(id="job-1", name="t", algorithm="baseline", config={}))
    system = FunctionAgent(two_agents, instrument_openai=False)
    ev = Evaluator(system, ExactMatch(), lm, recorder=StoreRecorder(store, job.id), job_id=job.id)
    example = Example(id="ex-1", input={"q": "6 times 7"}, expected="42")
    result = await ev.run_one(system.seed_candidate(), example, "train")
    return result, load_spans(store, result.rollout_id)


async def test_token_ids_and_logprobs_round_trip_through_the_traced_lm_and_the_store() -> None:
    model = fake()
    result, spans = await episode(TokenRecordingLM(model), MemoryStore())
    assert result.output == "42"  # the agent got the reply text as without tokens
    calls = credited_calls(spans, group_id="ex-1", reward=result.score)

    assert [c.position for c in calls] == [0, 1, 2]
    assert [c.agent for c in calls] == ["planner", "solver", "solver"]
    assert {c.episode_id for c in calls} == {spans[0].attempt_id}
    plan = calls[0]
    assert model.decode(plan.prompt_token_ids) == "You plan: list the steps for 6 times 7"
    assert model.decode(plan.completion_token_ids) == "step one"
    assert plan.completion_logprobs == [-0.1 * (1 + i % 5) for i in plan.completion_token_ids]
    assert plan.prompt == [{"role": "user", "content": "You plan: list the steps for 6 times 7"}]
    assert plan.completion == {"role": "assistant", "content": "step one"}
    assert model.decode(calls[2].prompt_token_ids) == "check 42"


async def test_tokens_are_not_recorded_unless_asked() -> None:
    result, spans = await episode(fake(), MemoryStore())
    assert result.output == "42"
    chat = [s for s in spans if s.attributes.get(sc.GEN_AI_OPERATION_NAME) == "chat"]
    assert len(chat) == 3
    assert not any(sc.LM_PROMPT_TOKEN_IDS in s.attributes for s in chat)
    calls = credited_calls(spans, group_id="ex-1", reward=1.0)
    assert [(c.prompt_token_ids, c.completion_logprobs) for c in calls] == [([], None)] * 3


async def test_record_tokens_setting_asks_every_call_for_its_tokens() -> None:
    def lm(**settings: Any) -> MeteredLM:
        config = LMConfig(model="python/x:y", **settings)
        return build_lm(config, role="task", meter=UsageMeter(), cache=None, base=fake())

    messages = [{"role": "user", "content": "plan it"}]
    assert (await lm().complete(messages)).tokens is None  # off by default
    recorded = await lm(record_tokens=True).complete(messages)
    assert recorded.text == "step one"
    assert recorded.tokens is not None
    assert len(recorded.tokens.completion_token_ids) == 2


async def test_the_three_credit_policies() -> None:
    _, spans = await episode(fake(), MemoryStore())

    def rewards(credit: Any, reward: float | None = 1.0) -> list[float]:
        return [c.reward for c in credited_calls(spans, group_id="g", reward=reward, credit=credit)]

    assert rewards(same) == [1.0, 1.0, 1.0]
    assert rewards(discounted(0.5)) == [0.25, 0.5, 1.0]
    assert rewards(per_step) == [0.25, 0.75, 0.0]  # what the agent emitted after each call
    assert rewards(same, reward=None) == [0.25] * 3  # no verifier reward: the last emitted
    assert credit_policy("discounted", gamma=0.5) == discounted(0.5)
    assert credit_policy("per_step") is per_step
    with pytest.raises(ValueError, match="unknown credit policy 'last'"):
        credit_policy("last")
    with pytest.raises(ValueError, match="gamma"):
        discounted(0.0)


async def test_selection_keeps_one_agents_calls_in_their_own_positions() -> None:
    _, spans = await episode(TokenRecordingLM(fake()), MemoryStore())

    solver = credited_calls(
        spans, group_id="g", reward=1.0, credit=discounted(0.5), select=agent_named("solver")
    )
    assert [(c.agent, c.position, c.reward) for c in solver] == [
        ("solver", 0, 0.5),
        ("solver", 1, 1.0),
    ]
    assert solver[0].prompt[-1]["content"] == "solve step one"
    steps = credited_calls(spans, group_id="g", reward=1.0, credit=per_step, select=solver_only)
    assert [c.reward for c in steps] == [0.75, 0.0]  # the planner's reward stays the planner's

    planned = credited_calls(spans, group_id="g", reward=1.0, select=uses_component(PLANNER))
    assert [c.agent for c in planned] == ["planner"]
    assert credited_calls(spans, group_id="g", reward=1.0, select=agent_named("critic")) == []


def solver_only(span: SpanRecord, agent: str | None) -> bool:
    return agent == "solver"


def _span(span_id: str, sequence: int, parent: str | None = None, **attributes: Any) -> SpanRecord:
    at = datetime.now(UTC)
    return SpanRecord(
        trace_id="t" * 32,
        span_id=span_id,
        parent_id=parent,
        name=str(attributes.pop("name", "chat m")),
        start_time=at,
        end_time=at,
        attributes=attributes,
        attempt_id="r:1",
        sequence=sequence,
    )


def test_the_agent_of_a_call_is_read_from_the_spans_above_it() -> None:
    """Frameworks traced with the GenAI conventions name the agent on an ``invoke_agent``
    span above their calls; a call without a name anywhere above it has none."""
    reply = '[{"role": "assistant", "content": "ok"}]'
    chat = {sc.GEN_AI_OPERATION_NAME: "chat", sc.GEN_AI_OUTPUT_MESSAGES: reply}
    spans = [
        _span("a", 1, name="invoke_agent researcher", **{sc.GEN_AI_AGENT_NAME: "researcher"}),
        _span("b", 2, "a", name="step"),
        _span("c", 3, "b", **chat),
        _span("d", 4, None, **chat),
        _span("e", 5, "d", name=sc.REWARD_SPAN, **{sc.REWARD_VALUE: 0.5}),
    ]
    calls = credited_calls(spans, group_id="g")
    assert [(c.agent, c.reward) for c in calls] == [("researcher", 0.5), (None, 0.5)]
    with pytest.raises(ValueError, match="no reward"):
        credited_calls(spans[:4], group_id="g")
    other = _span("f", 6, **chat).model_copy(update={"attempt_id": "r:2"})
    with pytest.raises(ValueError, match="one attempt"):
        credited_calls([*spans, other], group_id="g")
