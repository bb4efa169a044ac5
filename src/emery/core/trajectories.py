"""Training rows for RL on agents: one LM call of an episode with its tokens and credit.

``tracing.trajectories`` builds them from a rollout's spans (token ids and
log-probabilities recorded by the LM proxy or the traced LM); ``training`` reads them.
Episodes of the same example share a ``group_id``: GRPO's advantage is relative to the
group.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class CreditedCall(BaseModel):
    """One LM call of an episode, with its tokens and the reward credited to it."""

    group_id: str
    """The example the episode ran on: GRPO compares the episodes of one group."""
    episode_id: str
    """The rollout attempt the call belongs to."""
    position: int = Field(ge=0)
    """The call's index among the episode's credited LM calls (0 = first)."""
    span_id: str
    agent: str | None = None
    """The agent or component that made the call (its span's agent name), when known."""
    prompt: list[dict[str, Any]] = Field(default_factory=list)
    """The chat messages sent."""
    completion: dict[str, Any] = Field(default_factory=dict)
    """The assistant message received."""
    prompt_token_ids: list[int]
    completion_token_ids: list[int]
    completion_logprobs: list[float] | None = None
    """The sampling policy's log-probability of each completion token, when recorded."""
    reward: float
    """The reward credited to this call by the credit policy."""
