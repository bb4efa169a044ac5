"""Job events, and the progress of an evaluation batch, as one-line text for terminals
and logs.

Every reader of stored events (``emery jobs events``, the progress display, the SDK) goes
through this module, so importing it registers the event kinds of every built-in owner: the
algorithms' (``register_builtin_payloads``) and the training jobs' (``training.events``)."""

from __future__ import annotations

from typing import Any

from emery.algorithms.registry import register_builtin_payloads
from emery.core.approvals import ApprovalApplied, ApprovalRequested
from emery.core.events import (
    STATE_KINDS,
    BaselineEvaluated,
    BestUpdated,
    BudgetPlanned,
    BudgetWarning,
    CandidateEvaluated,
    CandidateProposed,
    CheckpointSaved,
    Event,
    FrontierUpdated,
    IterationCompleted,
    PaceWarning,
    Payload,
    PlanPayload,
    RolloutsFailed,
    SearchNotRun,
    SelectPlanned,
    StateChanged,
)
from emery.evaluation.progress import BatchProgress
from emery.evaluation.stats import failure_note, unreadable_note
from emery.training import events  # noqa: F401 - registers the training kinds

register_builtin_payloads()


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{float(value):.1%}"


def _short(candidate_id: str | None) -> str:
    return str(candidate_id or "-")[:8]


def _brief(value: Any, limit: int = 80) -> str:
    """One line of at most ``limit`` characters: long texts (prompts, replies) are cut."""
    text = " ".join(str(value).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _words(kind: str, payload: Payload) -> str | None:
    """The payload of a core kind in words; None for kinds shown as key=value."""
    match payload:
        case StateChanged(reason=reason):
            return f"{kind} ({reason})" if reason else kind
        case BaselineEvaluated() as p:
            return f"baseline {_short(p.candidate_id)} on {p.split}: {_pct(p.score)} (n={p.n})"
        case CandidateProposed() as p:
            parents = ", ".join(_short(parent) for parent in p.parents)
            return (
                f"proposed {_short(p.candidate_id)} by {p.operation}"
                + (f" from {parents}" if parents else "")
                + (f" (changed: {', '.join(p.components)})" if p.components else "")
            )
        case CandidateEvaluated() as p:
            failed = failure_note(p.failed, p.timeouts, ", ") + unreadable_note(p.unreadable, ", ")
            return (
                f"evaluated {_short(p.candidate_id)} on {p.split}: {_pct(p.score)}"
                f" (n={p.n}, {p.new_rollouts} new rollouts{failed})"
            )
        case RolloutsFailed() as p:
            timeouts = f" ({p.timeouts} timed out)" if p.timeouts else ""
            return (
                f"warning: the seed failed on {p.failed} of {p.n} {p.split} examples{timeouts};"
                f" e.g. {p.example_id}: {_brief(p.error, 160)}"
            )
        case BestUpdated() as p:
            was = f" (was {_pct(p.previous_score)})" if p.previous_score is not None else ""
            return f"best is now {_short(p.candidate_id)}: {_pct(p.score)}{was}"
        case ApprovalRequested() as p:
            return (
                f"waiting for approval {p.approval_id}: {_short(p.candidate_id)}"
                f" {_pct(p.score)} would replace {_short(p.current_id or '')}"
                f" {_pct(p.current_score)}"
            )
        case ApprovalApplied() as p:
            why = f" ({_brief(p.reason, 120)})" if p.reason else ""
            made = f" -> {p.result if ' ' in p.result else _short(p.result)}" if p.result else ""
            return f"approval {p.approval_id}: {_short(p.candidate_id)} {p.status}{why}{made}"
        case FrontierUpdated() as p:
            return f"frontier of {p.size}, best {_short(p.best_candidate_id)} {_pct(p.best_score)}"
        case IterationCompleted() as p:
            return (
                f"iteration {p.iteration} done · {p.metric_calls} metric calls"
                f" · best {_pct(p.best_score)}"
            )
        case CheckpointSaved() as p:
            return f"checkpoint {p.iteration} saved"
        case BudgetPlanned() as p:
            return p.summary
        case SelectPlanned() as p:
            return p.message()
        case BudgetWarning() as p:
            return f"budget warning: {p.resource} at {p.used:g} of {p.limit:g}"
        case SearchNotRun() | PaceWarning() as p:
            return f"warning: {p.message()}"
        case PlanPayload() as p:
            return p.summary + (f" ({'; '.join(p.notes)})" if p.notes else "")
    return None


def describe_event(item: Event) -> str:
    """``kind: details`` in words; other kinds, and data that does not fit its kind's model
    (an event stored by an older version), show their data as key=value."""
    try:
        text = _words(item.kind, item.payload())
    except ValueError:
        text = None
    if text is not None:
        return text
    if item.kind in STATE_KINDS:
        reason = item.data.get("reason")
        return f"{item.kind} ({reason})" if reason else item.kind
    details = " ".join(f"{key}={_brief(value)}" for key, value in item.data.items())
    return f"{item.kind} {details}".strip()


def event_line(item: Event) -> str:
    """``HH:MM:SS #seq text``."""
    stamp = item.at.astimezone().strftime("%H:%M:%S") if item.at is not None else "--:--:--"
    return f"{stamp} #{item.seq or 0:<4} {describe_event(item)}"


def _duration(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes} min {secs:02d} s" if minutes else f"{secs} s"


def progress_line(progress: BatchProgress) -> str:
    """``scoring abcd1234 on val: 12/40 rollouts, 1 failed, 3 unreadable, 0.8/s, ETA 35 s``
    (unreadable: replies the parser could not read, scored 0 as wrong answers)."""
    parts = [f"{progress.done}/{progress.total} rollouts"]
    if progress.failed:
        parts.append(f"{progress.failed} failed")
    if progress.unreadable:
        parts.append(f"{progress.unreadable} unreadable")
    rate, eta = progress.rate, progress.eta_s
    if rate is not None:
        parts.append(f"{rate:.2f}/s")
    if eta is not None and not progress.finished:
        parts.append(f"ETA {_duration(eta)}")
    if progress.finished:
        parts.append(f"took {_duration(progress.elapsed_s)}")
    return f"scoring {_short(progress.candidate_id)} on {progress.split}: {', '.join(parts)}"
