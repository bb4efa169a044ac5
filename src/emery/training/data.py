"""Chat fine-tuning data: a JSONL file checked line by line, or a finished job's rollouts."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from emery.core.errors import ConfigError
from emery.core.hashing import canonical_json
from emery.store.protocol import Store
from emery.store.records import EvaluationFilter, EvaluationRecord
from emery.tracing.export import check_chat_example, chosen_candidates, rollout_examples

Conversation = list[dict[str, Any]]
"""One chat: OpenAI-style messages, the last one the assistant's reply to learn."""


class SampledData(BaseModel):
    """What an SFT job's rejection sampling gave."""

    model: str
    samples_per_example: int
    temperature: float
    examples: int
    """Examples of the ``[sft]`` splits."""
    rollouts: int
    """Sampled rollouts stored (``examples`` × ``samples_per_example``)."""
    kept: int
    """Distinct chats kept from them (scoring >= ``min_score``)."""
    examples_kept: int
    """Examples with at least one kept reply."""
    tokens: int
    """Prompt and completion tokens of the sampling calls."""
    stored: int = 0
    """Distinct chats of the source job's stored rollouts, trained beside them."""

    def __str__(self) -> str:
        return (
            f"sampled {self.samples_per_example}x per example at temperature"
            f" {self.temperature:g} with {self.model}: {self.kept} replies kept from"
            f" {self.examples_kept} of {self.examples} examples ({self.rollouts} rollouts,"
            f" {self.tokens} tokens), beside {self.stored} stored chats of the source job"
        )


def load_chat_jsonl(path: Path) -> list[Conversation]:
    """The conversations of a chat JSONL file; a bad line is a one-line ``ConfigError``
    naming the file and the line."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the sft data {path}: {exc}") from None
    conversations = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        conversations.append(parse_line(line, f"{path}:{number}"))
    if not conversations:
        raise ConfigError(f"{path}: no chat examples")
    return conversations


def parse_line(line: str, where: str) -> Conversation:
    """One JSONL line as a conversation, or a ``ConfigError`` starting with ``where``."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{where}: not JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(record, dict):
        raise ConfigError(f"{where}: a line must be a JSON object with 'messages'")
    try:
        check_chat_example(record)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    if any(m.get("tool_calls") or m["role"] == "tool" for m in record["messages"]):
        raise ConfigError(f"{where}: tool calls are not supported by sft jobs yet")
    messages: Conversation = record["messages"]
    return messages


def job_conversations(
    store: Store,
    job_id: str,
    *,
    candidate: str,
    splits: tuple[str, ...],
    min_score: float,
) -> list[Conversation]:
    """The chats of a finished job's successful rollouts (as ``emery export`` writes them)
    of ``candidate`` ("best", "all" or an id prefix) on ``splits``, scoring >= ``min_score``;
    none is a ``ConfigError`` saying which settings would take more."""
    conversations = stored_conversations(
        store, job_id, candidate=candidate, splits=splits, min_score=min_score
    )
    if not conversations:
        raise ConfigError(
            f"job {store.resolve_job_id(job_id)} has no successful rollouts of candidate"
            f" {candidate!r} on {'/'.join(splits)} scoring >= {min_score}:"
            f" try {wider(candidate, splits)}"
        )
    return conversations


def stored_conversations(
    store: Store,
    job_id: str,
    *,
    candidate: str,
    splits: tuple[str, ...],
    min_score: float,
) -> list[Conversation]:
    """``job_conversations``' chats, possibly none."""
    job = store.get_job(store.resolve_job_id(job_id))
    if job.state != "succeeded":
        raise ConfigError(f"sft.source_job {job.id} has not succeeded (it is {job.state})")
    wanted = chosen_candidates(store, job, None if candidate == "all" else candidate)
    conversations: list[Conversation] = []
    seen: set[str] = set()
    for split in splits:
        query = EvaluationFilter(split=split, min_score=min_score)
        if job.eval_scope:
            query.scope = job.eval_scope
        else:
            query.job_id = job.id
        for record in store.list_evaluations(query, limit=None).items:
            result = record.result
            if result.error is not None or (
                wanted is not None and result.candidate_id not in wanted
            ):
                continue
            key = record.rollout_id or f"{result.candidate_id}:{result.example_id}"
            if key in seen:
                continue
            seen.add(key)
            conversations += record_conversations(store, record, key)
    return conversations


def record_conversations(store: Store, record: EvaluationRecord, key: str) -> list[Conversation]:
    """The valid chats of one stored evaluation's rollout (``key`` names it in errors)."""
    conversations = []
    for line in rollout_examples(store, record):
        try:
            conversations.append(parse_line(json.dumps(line), f"rollout {key}"))
        except ConfigError:
            continue
    return conversations


def distinct(conversations: Sequence[Conversation]) -> list[Conversation]:
    """``conversations`` without repeats (the first of equal chats kept), in order."""
    seen: set[str] = set()
    kept = []
    for conversation in conversations:
        key = canonical_json(conversation)
        if key not in seen:
            seen.add(key)
            kept.append(conversation)
    return kept


def wider(candidate: str, splits: Sequence[str]) -> str:
    """The selection settings that would take more rollouts than these."""
    options = [] if candidate == "all" else ['sft.candidate = "all"']
    options.append("a lower sft.min_score")
    if "val" not in splits:
        options.append('sft.splits = ["train", "val"]')
    return ", ".join(options[:-1]) + " or " + options[-1] if len(options) > 1 else options[0]


def hold_out(
    conversations: list[Conversation], fraction: float, seed: int
) -> tuple[list[Conversation], list[Conversation]]:
    """(train, val): a shuffled ``fraction`` held out for the val loss (none under 2 chats)."""
    order = list(conversations)
    random.Random(seed).shuffle(order)
    n_val = int(len(order) * fraction) if len(order) >= 2 else 0
    if fraction > 0 and n_val == 0 and len(order) >= 4:
        n_val = 1
    return order[n_val:], order[:n_val]


def prompt_completion(conversation: Conversation) -> dict[str, Conversation]:
    """trl's conversational prompt-completion row: the loss covers only the last reply."""
    return {"prompt": conversation[:-1], "completion": conversation[-1:]}
