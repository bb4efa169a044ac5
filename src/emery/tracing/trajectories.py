"""A rollout's spans as the rows RL on agents trains on: one ``CreditedCall`` per LM call.

``credited_calls`` reads the spans of one attempt (an episode): each answered ``chat``
span the selection keeps becomes a row with its messages, its token ids and
log-probabilities (recorded when the model's ``record_tokens`` is set: empty lists and
None otherwise), its position among the kept calls, the agent that made it, and the reward
the credit policy gives it. The episode's reward is the one given (the verifier's score),
else the last reward the agent emitted. A reward span counts as the step reward of the last
LM call before it (summed when several follow one call). A stored attempt's spans are
``tracing.store_recorder.load_spans(store, rollout_id, attempt_id)``.

Credit policies (``Credit``): ``same`` (every call gets the episode's reward),
``discounted(gamma)`` (the last call gets it, each earlier one ``gamma`` times the next
one's) and ``per_step`` (each call gets the rewards the agent emitted after it, 0 for a
call none followed). Selections (``Selection``): ``every_call``, ``agent_named(name)``
(``gen_ai.agent.name`` on the span or the nearest span above it) and
``uses_component(text)`` (the call sent the component's text, its ``{field}`` placeholders
aside): a multi-agent system trains one agent.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from emery.core.spans import SpanRecord
from emery.core.trajectories import CreditedCall
from emery.tracing import conventions as sc
from emery.tracing.adapters import is_chat, ordered, request_messages, response_message


class Credit(Protocol):
    """How an episode's reward is shared among its LM calls."""

    def assign(self, steps: Sequence[float | None], reward: float) -> list[float]:
        """One reward per call, from what the agent emitted after each call (None:
        nothing) and the episode's reward."""
        ...


@dataclass(frozen=True)
class SameReward:
    """Every call gets the episode's reward."""

    def assign(self, steps: Sequence[float | None], reward: float) -> list[float]:
        return [reward] * len(steps)


@dataclass(frozen=True)
class Discounted:
    """The last call gets the episode's reward, each earlier call ``gamma`` times the next."""

    gamma: float

    def __post_init__(self) -> None:
        if not 0.0 < self.gamma <= 1.0:
            raise ValueError(f"gamma must be in (0, 1], not {self.gamma}")

    def assign(self, steps: Sequence[float | None], reward: float) -> list[float]:
        last = len(steps) - 1
        return [reward * self.gamma ** (last - i) for i in range(len(steps))]


@dataclass(frozen=True)
class PerStep:
    """Each call gets the rewards the agent emitted after it (0 when none followed it)."""

    def assign(self, steps: Sequence[float | None], reward: float) -> list[float]:
        return [0.0 if step is None else step for step in steps]


same = SameReward()
per_step = PerStep()


def discounted(gamma: float) -> Discounted:
    """``Discounted(gamma)``."""
    return Discounted(gamma)


CREDIT_POLICIES = ("same", "discounted", "per_step")


def credit_policy(name: str, *, gamma: float = 1.0) -> Credit:
    """The credit policy called ``name`` (``same``, ``discounted``, ``per_step``)."""
    if name == "same":
        return same
    if name == "discounted":
        return discounted(gamma)
    if name == "per_step":
        return per_step
    raise ValueError(f"unknown credit policy {name!r}; use one of {', '.join(CREDIT_POLICIES)}")


class Selection(Protocol):
    """Which LM calls are trained: asked of each answered ``chat`` span, with the agent
    that made it (None when no span names one)."""

    def __call__(self, span: SpanRecord, agent: str | None) -> bool: ...


@dataclass(frozen=True)
class EveryCall:
    """Every LM call of the episode."""

    def __call__(self, span: SpanRecord, agent: str | None) -> bool:
        return True


@dataclass(frozen=True)
class AgentNamed:
    """The calls of the agent called ``name``."""

    name: str

    def __call__(self, span: SpanRecord, agent: str | None) -> bool:
        return agent == self.name


_PLACEHOLDER = re.compile(r"\{[A-Za-z_][A-Za-z0-9_.]*\}")


@dataclass(frozen=True)
class UsesComponent:
    """The calls that sent a component's text: every piece of it between ``{field}``
    placeholders appears in the request's messages."""

    text: str

    def __post_init__(self) -> None:
        if not self.pieces():
            raise ValueError("uses_component needs a text with something besides placeholders")

    def pieces(self) -> list[str]:
        return [piece.strip() for piece in _PLACEHOLDER.split(self.text) if piece.strip()]

    def __call__(self, span: SpanRecord, agent: str | None) -> bool:
        sent = "\n".join(str(m.get("content") or "") for m in request_messages(span))
        return all(piece in sent for piece in self.pieces())


every_call = EveryCall()


def agent_named(name: str) -> AgentNamed:
    """``AgentNamed(name)``."""
    return AgentNamed(name)


def uses_component(text: str) -> UsesComponent:
    """``UsesComponent(text)``."""
    return UsesComponent(text)


def agent_of(span: SpanRecord, by_id: dict[str, SpanRecord]) -> str | None:
    """``gen_ai.agent.name`` of the span, else of the nearest span above it that has one."""
    seen: set[str] = set()
    current: SpanRecord | None = span
    while current is not None and current.span_id not in seen:
        name = current.attributes.get(sc.GEN_AI_AGENT_NAME)
        if isinstance(name, str) and name:
            return name
        seen.add(current.span_id)
        current = by_id.get(current.parent_id) if current.parent_id else None
    return None


def agents_in(spans: Sequence[SpanRecord]) -> set[str]:
    """The agents named on (or above) the answered ``chat`` spans of ``spans``."""
    by_id = {span.span_id: span for span in spans}
    return {
        agent
        for span in spans
        if is_chat(span) and response_message(span) is not None
        if (agent := agent_of(span, by_id)) is not None
    }


def emitted_reward(span: SpanRecord) -> float | None:
    """The value of a reward span (None for any other span)."""
    if span.name != sc.REWARD_SPAN:
        return None
    value = span.attributes.get(sc.REWARD_VALUE)
    return float(value) if isinstance(value, int | float) else None


def _ints(value: Any) -> list[int]:
    return [int(v) for v in value] if isinstance(value, list | tuple) else []


def _floats(value: Any) -> list[float] | None:
    return [float(v) for v in value] if isinstance(value, list | tuple) else None


@dataclass
class _Call:
    span: SpanRecord
    agent: str | None
    completion: dict[str, Any]
    step: float | None = None


def credited_calls(
    spans: Sequence[SpanRecord],
    *,
    group_id: str,
    reward: float | None = None,
    credit: Credit = same,
    select: Selection = every_call,
) -> list[CreditedCall]:
    """The training rows of one episode (the spans of one attempt, in any order).

    ``reward`` is the episode's reward (the verifier's score); without it the last reward
    the agent emitted counts, and an episode with neither is a ``ValueError``.
    """
    episodes = {span.attempt_id or span.rollout_id or span.trace_id for span in spans}
    if len(episodes) > 1:
        raise ValueError(f"spans of one attempt expected, got {len(episodes)} attempts")
    by_id = {span.span_id: span for span in spans}
    calls: list[_Call] = []
    emitted: list[float] = []
    for span in ordered(spans):
        value = emitted_reward(span)
        if value is not None:
            emitted.append(value)
            if calls:
                calls[-1].step = (calls[-1].step or 0.0) + value
        elif is_chat(span) and (completion := response_message(span)) is not None:
            calls.append(_Call(span, agent_of(span, by_id), completion))
    if reward is None:
        if not emitted:
            raise ValueError("the episode has no reward: pass the verifier's, or emit one")
        reward = emitted[-1]
    kept = [call for call in calls if select(call.span, call.agent)]
    credited = credit.assign([call.step for call in kept], reward)
    episode_id = next(iter(episodes), "")
    return [
        CreditedCall(
            group_id=group_id,
            episode_id=episode_id,
            position=position,
            span_id=call.span.span_id,
            agent=call.agent,
            prompt=request_messages(call.span),
            completion=call.completion,
            prompt_token_ids=_ints(call.span.attributes.get(sc.LM_PROMPT_TOKEN_IDS)),
            completion_token_ids=_ints(call.span.attributes.get(sc.LM_COMPLETION_TOKEN_IDS)),
            completion_logprobs=_floats(call.span.attributes.get(sc.LM_COMPLETION_LOGPROBS)),
            reward=value,
        )
        for position, (call, value) in enumerate(zip(kept, credited, strict=True))
    ]
