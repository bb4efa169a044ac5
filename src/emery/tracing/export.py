"""Fine-tuning data from a job's stored rollouts: OpenAI chat JSONL.

Each line is ``{"messages": [...]}`` (plus ``"tools"`` when the call offered tools): one
conversation of a successful rollout, taken from its recorded LM spans (or, for rollouts
stored without spans, from the run's component calls). Rollouts are chosen by score and
candidate.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from pydantic import BaseModel

from emery.core.errors import ConfigError
from emery.core.spans import SpanRecord
from emery.store.protocol import Store
from emery.store.records import EvaluationFilter, EvaluationRecord, JobRecord
from emery.store.states import require_id
from emery.tracing import conventions as sc
from emery.tracing.adapters import is_chat, ordered, to_conversations
from emery.tracing.store_recorder import load_spans

ROLES = frozenset({"system", "user", "assistant", "tool", "developer"})


class ExportSummary(BaseModel):
    """What an export wrote."""

    rollouts: int = 0
    examples: int = 0
    skipped_invalid: int = 0
    candidates: list[str] = []


def check_chat_example(record: dict[str, Any]) -> None:
    """Raise ValueError unless ``record`` is a valid OpenAI chat fine-tuning line."""
    messages = record.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ValueError("'messages' must be a non-empty list")
    unknown = set(record) - {"messages", "tools", "parallel_tool_calls"}
    if unknown:
        raise ValueError(f"unexpected keys: {sorted(unknown)}")
    call_ids: set[str] = set()
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            raise ValueError(f"message {index}: role must be one of {sorted(ROLES)}")
        content = message.get("content")
        if content is not None and not isinstance(content, str):
            raise ValueError(f"message {index}: content must be text")
        calls = message.get("tool_calls")
        if calls is not None:
            if message["role"] != "assistant" or not isinstance(calls, list):
                raise ValueError(f"message {index}: only assistant messages carry tool_calls")
            for call in calls:
                function = call.get("function") if isinstance(call, dict) else None
                if not isinstance(function, dict) or not function.get("name"):
                    raise ValueError(f"message {index}: a tool call needs function.name")
                call_ids.add(str(call.get("id")))
        elif content is None:
            raise ValueError(f"message {index}: content is missing")
        if message["role"] == "tool" and message.get("tool_call_id") not in call_ids:
            raise ValueError(f"message {index}: tool result for an unknown tool call")
    if messages[-1]["role"] != "assistant":
        raise ValueError("the last message must be the assistant's")


def _tools(spans: Sequence[SpanRecord]) -> list[Any] | None:
    for span in ordered(spans):
        raw = span.attributes.get(sc.GEN_AI_TOOL_DEFINITIONS)
        if is_chat(span) and isinstance(raw, str):
            try:
                tools = json.loads(raw)
            except ValueError:
                continue
            if isinstance(tools, list) and tools:
                return tools
    return None


def _from_calls(record: EvaluationRecord) -> list[list[dict[str, Any]]]:
    conversations = []
    for call in record.result.calls:
        if call.messages and call.reply:
            conversations.append(
                [dict(m) for m in call.messages] + [{"role": "assistant", "content": call.reply}]
            )
    return conversations


def rollout_examples(store: Store, record: EvaluationRecord) -> list[dict[str, Any]]:
    """The JSONL records of one evaluated rollout (its last attempt)."""
    spans: list[SpanRecord] = []
    if record.rollout_id:
        stored = load_spans(store, record.rollout_id)
        last = max((s.attempt_id or "" for s in stored), key=_attempt_number, default="")
        spans = [s for s in stored if s.attempt_id == last]
    conversations = to_conversations(spans) if spans else []
    if not conversations:
        conversations = _from_calls(record)
    tools = _tools(spans)
    out = []
    for conversation in conversations:
        line: dict[str, Any] = {"messages": conversation}
        if tools:
            line["tools"] = tools
        out.append(line)
    return out


def _attempt_number(attempt_id: str) -> int:
    tail = attempt_id.rsplit(":", 1)[-1]
    return int(tail) if tail.isdigit() else 0


def chosen_candidates(store: Store, job: JobRecord, candidate: str | None) -> list[str] | None:
    """Candidate ids to export: all (None), the job's best, or one by id or id prefix."""
    if candidate is None:
        return None
    if candidate == "best":
        if not job.best_candidate_id:
            raise ConfigError(f"job {job.id} has no best candidate yet")
        return [job.best_candidate_id]
    require_id(candidate, "candidate")
    ids = [c.id for c in store.job_candidates(job.id) if c.id.startswith(candidate)]
    if len(ids) != 1:
        what = "no" if not ids else f"{len(ids)}"
        raise ConfigError(f"{what} candidates of job {job.id} match {candidate!r}")
    return ids


def job_evaluations(
    store: Store, job: JobRecord, candidates: list[str] | None, min_score: float | None
) -> Iterator[EvaluationRecord]:
    """Successful evaluations of the job's candidates (in its evaluation scope)."""
    mine = {c.id for c in store.job_candidates(job.id)}
    wanted = set(candidates) if candidates is not None else mine
    base = EvaluationFilter(min_score=min_score)
    if job.eval_scope:
        base.scope = job.eval_scope
    else:
        base.job_id = job.id
    offset = 0
    while True:
        page = store.list_evaluations(base, limit=500, offset=offset)
        for record in page.items:
            if record.result.candidate_id in wanted and record.result.error is None:
                yield record
        offset += len(page.items)
        if not page.items or offset >= page.total:
            return


def export_openai_jsonl(
    store: Store,
    job_id: str,
    lines: list[str],
    *,
    min_score: float | None = None,
    candidate: str | None = None,
) -> ExportSummary:
    """Append the job's fine-tuning lines to ``lines``; invalid conversations are skipped."""
    job = store.get_job(job_id)
    candidates = chosen_candidates(store, job, candidate)
    summary = ExportSummary(candidates=candidates or [])
    seen: set[str] = set()
    for record in job_evaluations(store, job, candidates, min_score):
        key = record.rollout_id or f"{record.result.candidate_id}:{record.result.example_id}"
        if key in seen:
            continue
        seen.add(key)
        summary.rollouts += 1
        for line in rollout_examples(store, record):
            try:
                check_chat_example(line)
            except ValueError:
                summary.skipped_invalid += 1
                continue
            lines.append(json.dumps(line, ensure_ascii=False))
            summary.examples += 1
    return summary
