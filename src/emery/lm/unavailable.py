"""A search role's model that cannot answer: the job waits for it instead of failing.

The reflection, proposer and judge models write the search's next step. When one of their
calls fails after the model's own retries (``lm.max_attempts`` for an ``openai/`` model),
``RoleGuard`` raises ``ModelUnavailable`` naming the role, and the job engine pauses the
job with that reason: resuming it repeats the step once the model is back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from emery.core.models import ChatMessage
from emery.lm.base import LM, Completion, LMError
from emery.lm.provider_errors import ProviderStop
from emery.lm.wrapper import LMWrapper


class ModelUnavailable(LMError):
    """A call of the ``role`` model failed after its retries."""

    def __init__(self, role: str, model: str, cause: BaseException) -> None:
        detail = " ".join(str(cause).split()) or "no detail"
        if len(detail) > 300:
            detail = detail[:299] + "…"
        super().__init__(
            f"the {role} model {model} failed: {type(cause).__name__}: {detail}"
            "; resume the job when it answers again"
        )
        self.role = role


class RoleGuard(LMWrapper):
    """``inner`` for ``role``: any failed call raises ``ModelUnavailable``."""

    def __init__(self, inner: LM, role: str) -> None:
        super().__init__(inner)
        self.role = role

    async def _call(self, messages: Sequence[ChatMessage], params: dict[str, Any]) -> Completion:
        try:
            return await self.inner.complete(messages, **params)
        except (ModelUnavailable, ProviderStop):
            raise
        except Exception as exc:
            raise ModelUnavailable(self.role, self.model, exc) from exc


def guard_search_roles(lms: dict[str, LM]) -> dict[str, LM]:
    """The models by role with every role but ``task`` guarded (a task model's failure is
    a failed rollout, which the evaluator scores)."""
    return {role: lm if role == "task" else RoleGuard(lm, role) for role, lm in lms.items()}
