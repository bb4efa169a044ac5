"""One call to every hosted model of a job before its first evaluation, so a wrong key,
model name or URL is one line within seconds instead of a batch of failed rollouts."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Protocol, runtime_checkable

from emery.lm.base import LM
from emery.lm.provider_errors import ProviderRefused
from emery.lm.wrapper import unwrapped


@runtime_checkable
class Checkable(Protocol):
    """A model that can say, with one cheap call, whether its settings are accepted."""

    async def check(self) -> None:
        """Raise ``ProviderRefused`` when the provider refuses the model's settings."""
        ...


async def check_models(lms: Mapping[str, LM]) -> None:
    """Check each distinct hosted model of ``lms`` (by role) at once; the first refusal
    raises ``ProviderRefused`` naming its role's settings (``lm.<role>``)."""
    first_role: dict[int, tuple[str, Checkable]] = {}
    for role, lm in lms.items():
        base = unwrapped(lm)
        if isinstance(base, Checkable):
            first_role.setdefault(id(getattr(base, "throttle", base)), (role, base))
    checks = list(first_role.values())
    outcomes = await asyncio.gather(*(model.check() for _, model in checks), return_exceptions=True)
    for (role, _), outcome in zip(checks, outcomes, strict=True):
        if isinstance(outcome, ProviderRefused):
            raise ProviderRefused(f"lm.{role}: {outcome}") from outcome
        if isinstance(outcome, BaseException):
            raise outcome
