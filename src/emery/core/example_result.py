"""What scoring one example produced, shared by the evaluator, the store and the algorithms."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from emery.core.models import ChatMessage, Split

FailureKind = Literal["model", "timeout", "error", "output", "verifier"]
"""Why a run has no score of its own: the task model's call failed (``model``), the run
ran out of time or fell silent (``timeout``), the system raised (``error``), the system
reported its output unusable (``output``; on results stored before ``unreadable`` was,
also a reply the parser could not read), or the verifier raised (``verifier``). A reply
the parser cannot read is no failure: see ``ExampleResult.unreadable``."""


class TokenUsage(BaseModel):
    """Tokens read and written by one call."""

    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class RoleUsage(BaseModel):
    """LM usage of one role (task, reflection, proposer, judge). Cache hits count as calls
    but cost no tokens; what they took when first asked is kept in ``cached_tokens`` and
    ``cached_cost_usd``, which the budget counts (``budget_tokens``, ``budget_cost_usd``)
    so that a repeated call (a step resumed after a kill) spends the budget as the first
    call did."""

    calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0
    cached_tokens: int = 0
    cached_cost_usd: float = 0.0
    rate_limited: int = 0
    """Rate-limit answers (429 and the like) the role's calls waited out."""
    rate_limit_wait_s: float = 0.0
    """Seconds the role's calls waited on rate limits after those answers."""

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def budget_tokens(self) -> int:
        """The tokens ``[job.budget] lm_tokens`` counts: paid and answered from the cache."""
        return self.total_tokens + self.cached_tokens

    @property
    def budget_cost_usd(self) -> float:
        """The cost ``[job.budget] lm_cost_usd`` counts: paid and answered from the cache."""
        return self.cost_usd + self.cached_cost_usd

    def add(self, other: RoleUsage) -> RoleUsage:
        return RoleUsage(
            **{name: getattr(self, name) + getattr(other, name) for name in RoleUsage.model_fields}
        )


class ComponentCall(BaseModel):
    """One use of a component during a run: what it was given and what it produced."""

    component: str
    inputs: dict[str, Any] = Field(default_factory=dict)
    messages: list[ChatMessage] = Field(default_factory=list)
    reply: str = ""
    output: Any = None
    error: str | None = None


class ExampleResult(BaseModel):
    """One scored run: output, score, feedback, error, the calls behind it, usage and latency."""

    candidate_id: str
    example_id: str
    split: Split | None = None
    output: Any = None
    score: float = 0.0
    feedback: str = ""
    error: str | None = None
    failure: FailureKind | None = None
    """Why the run failed, when ``error`` is set (None on results stored before it was)."""
    unreadable: str | None = None
    """The parser's message when the system's reply could not be read: a wrong answer,
    scored 0 with this message in ``feedback``; ``error`` stays None (the run did not fail)."""
    calls: list[ComponentCall] = Field(default_factory=list)
    usage: TokenUsage = TokenUsage()
    lm_calls: int = 0
    latency_s: float = 0.0
    rollout_id: str | None = None
    rollout_status: str | None = None
    attempts: int = 0
    span_count: int = 0
    lm_usage: dict[str, RoleUsage] = Field(default_factory=dict)
    """Every model call of the run (task model and judge) by role, as the job's usage meter
    counts it: how a run on another process (a runner, a Ray worker) is charged to the job."""
    trace: str = ""
    """An excerpt of the last attempt's spans (LM calls, tool calls, emitted messages,
    rewards, errors) for reflection; empty when the attempt recorded nothing but the run."""
    ranked: tuple[float, float] | None = None
    """(score, gold score) of a verifier graph judged by rank agreement: a batch whose
    results carry these is scored over the whole batch (``evaluation.rank``)."""
