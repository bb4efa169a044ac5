"""Any Python callable as a verifier."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from emery.core.errors import ConfigError
from emery.core.imports import import_object
from emery.core.models import Example
from emery.core.user_code import call_user_function
from emery.verifiers.base import Verdict


def to_verdict(result: Any) -> Verdict:
    """Accept a Verdict, a bool, a number, or a (score, feedback) pair."""
    if isinstance(result, Verdict):
        return result
    if isinstance(result, tuple) and len(result) == 2:
        score, feedback = result
        return Verdict(score=float(score), feedback=str(feedback))
    if isinstance(result, bool | int | float):
        return Verdict(score=float(result), feedback="")
    if isinstance(result, dict) and "score" in result:
        return Verdict(score=float(result["score"]), feedback=str(result.get("feedback", "")))
    raise TypeError(f"a verifier returned {type(result).__name__}; expected a score or Verdict")


class CallableVerifier:
    """Wraps ``fn(example, output)`` or ``fn(example, output, trace)``, sync or async."""

    def __init__(self, fn: Callable[..., Any] | str) -> None:
        self.fn: Callable[..., Any] = import_object(fn) if isinstance(fn, str) else fn
        if not callable(self.fn):
            raise ConfigError(f"verifier {fn!r} is not callable")
        params = inspect.signature(self.fn).parameters
        self._wants_trace = len(params) >= 3 or "trace" in params

    async def verify(self, example: Example, output: Any, trace: Any = None) -> Verdict:
        """The function's verdict; a sync function runs in its own thread (a caller's time
        limit can abandon it) and its ``sys.exit`` is an error (``UserCodeExited``)."""
        args = (example, output, trace) if self._wants_trace else (example, output)
        return to_verdict(await call_user_function("verifier", self.fn, *args))
