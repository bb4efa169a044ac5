"""What an environment action returns, and the exception a capped episode raises.

Standard library only: the episode process imports this module.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

STOP_REASONS = ("answer", "budget", "timeout", "exception", "exit", "crash", "invalid")
"""How an episode ends: ``run`` returned an answer, a cap was exceeded, the time limit
passed, the code raised, called ``sys.exit``, killed its episode process, or its module
defines no callable ``run``."""


class BudgetExceeded(BaseException):
    """A per-episode cap (``max_llm_calls``, ``max_env_actions``) was exceeded.

    A ``BaseException``, so ``except Exception`` in harness code does not swallow it; the
    episode ends with stop reason ``budget`` even if the code catches it.
    """


@dataclass(frozen=True)
class Observation:
    """The result of one environment action: its text, whether it worked, whether the
    environment considers the episode finished, and optional structured data."""

    text: str
    ok: bool = True
    done: bool = False
    data: Any = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, value: dict[str, Any]) -> Observation:
        return cls(
            text=str(value.get("text", "")),
            ok=bool(value.get("ok", True)),
            done=bool(value.get("done", False)),
            data=value.get("data"),
        )

    def __str__(self) -> str:
        return self.text if self.ok else f"ERROR: {self.text}"
