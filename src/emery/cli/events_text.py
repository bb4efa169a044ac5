"""Job events as one-line text for terminals and logs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from emery.core.events import Event


def _pct(value: Any) -> str:
    return "-" if value is None else f"{float(value):.1%}"


def _short(candidate_id: Any) -> str:
    return str(candidate_id or "-")[:8]


def _brief(value: Any, limit: int = 80) -> str:
    """One line of at most ``limit`` characters: long texts (prompts, replies) are cut."""
    text = " ".join(str(value).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _state(data: dict[str, Any]) -> str:
    reason = data.get("reason")
    return f" ({reason})" if reason else ""


_FORMATS: dict[str, Callable[[dict[str, Any]], str]] = {
    "baseline_evaluated": lambda d: (
        f"baseline {_short(d['candidate_id'])} on {d['split']}: {_pct(d['score'])} (n={d['n']})"
    ),
    "candidate_proposed": lambda d: (
        f"proposed {_short(d['candidate_id'])} by {d['operation']}"
        + (f" from {', '.join(_short(p) for p in d['parents'])}" if d.get("parents") else "")
        + (f" (changed: {', '.join(d['components'])})" if d.get("components") else "")
    ),
    "candidate_evaluated": lambda d: (
        f"evaluated {_short(d['candidate_id'])} on {d['split']}: {_pct(d['score'])}"
        f" (n={d['n']}, {d.get('new_rollouts', 0)} new rollouts)"
    ),
    "best_updated": lambda d: (
        f"best is now {_short(d['candidate_id'])}: {_pct(d['score'])}"
        + (f" (was {_pct(d['previous_score'])})" if d.get("previous_score") is not None else "")
    ),
    "frontier_updated": lambda d: (
        f"frontier of {d['size']}, best {_short(d['best_candidate_id'])} {_pct(d['best_score'])}"
    ),
    "iteration_completed": lambda d: (
        f"iteration {d['iteration']} done · {d['metric_calls']} metric calls"
        f" · best {_pct(d.get('best_score'))}"
    ),
    "checkpoint_saved": lambda d: f"checkpoint {d['iteration']} saved",
    "budget_warning": lambda d: (
        f"budget warning: {d['resource']} at {d['used']:g} of {d['limit']:g}"
    ),
}
STATE_KINDS = (
    "created",
    "queued",
    "started",
    "resumed",
    "paused",
    "succeeded",
    "failed",
    "cancelled",
)


def describe_event(item: Event) -> str:
    """``kind: details`` in words; unknown kinds show their data as key=value."""
    data = item.data
    if item.kind in STATE_KINDS:
        return f"{item.kind}{_state(data)}"
    formatter = _FORMATS.get(item.kind)
    if formatter is not None:
        try:
            return formatter(data)
        except (KeyError, TypeError, ValueError):
            pass
    details = " ".join(f"{key}={_brief(value)}" for key, value in data.items())
    return f"{item.kind} {details}".strip()


def event_line(item: Event) -> str:
    """``HH:MM:SS #seq text``."""
    stamp = item.at.astimezone().strftime("%H:%M:%S") if item.at is not None else "--:--:--"
    return f"{stamp} #{item.seq or 0:<4} {describe_event(item)}"
