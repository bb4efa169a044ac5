"""A dataset from recorded traces: selected chat calls become examples.

``dataset_from_traces`` selects chat spans from the store (``TraceSelection``: service,
span name, time range, model, attributes), recovers each call's input fields by matching
its prompt against a ``TraceTemplate`` (unmatched and ambiguous calls are counted, never
guessed), keeps the recorded reply as the reference output (``expected``) and the
feedback on the call as its label (``meta["feedback"]``), redacts the texts (inputs,
reply, feedback comment) before the example is made, and splits
by time: the newest calls are test, the ones before them val, the oldest train, so a
search never sees the future.

Feedback on a call, most specific first: feedback stored by the id of the call's span or
of a span above it (the nearest wins), then feedback on its trace, then an emitted reward
(``emery.reward``) that follows it in its trace; among several at one level the latest
wins. Rewards outside [0, 1] are clamped.
"""

from __future__ import annotations

import fnmatch
import json
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from emery.core.errors import ConfigError
from emery.core.feedback import FeedbackRecord
from emery.core.models import SPLITS, Dataset, Example, Split
from emery.core.spans import SpanRecord
from emery.data.loaders import SplitFractions
from emery.data.redaction import Redactor
from emery.data.trace_template import TraceTemplate
from emery.store.protocol import Store
from emery.store.records import SpanFilter
from emery.tracing import conventions as sc
from emery.tracing.adapters import is_chat, request_messages, response_message

PAGE = 1000
TIME_FRACTIONS = SplitFractions(train=0.6, val=0.2, test=0.2)


class TraceSelection(BaseModel):
    """Which recorded chat calls to read; every set field must match."""

    model_config = ConfigDict(extra="forbid")

    service: str | None = None
    """The ``service.name`` the spans came from."""
    span_name: str | None = None
    """The span's name, or a glob (``chat gpt-*``)."""
    since: datetime | None = None
    """Calls that started at or after this time."""
    until: datetime | None = None
    """Calls that started before this time."""
    model: str | None = None
    """The requested or the responding model."""
    attributes: dict[str, str] = Field(default_factory=dict)
    """Span attributes that must equal these values (compared as text)."""
    include_jobs: bool = False
    """Also read the calls of emery's own jobs (left out by default: they are not traffic)."""

    @field_validator("since", "until")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        """A time without a zone is UTC (as the CLI reads it), not the machine's zone."""
        return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value

    def admits(self, span: SpanRecord) -> bool:
        """Whether a chat span is one this selection reads."""
        a = span.attributes
        if span.job_id is not None and not self.include_jobs:
            return False
        if self.service is not None and str(a.get(sc.SERVICE_NAME)) != self.service:
            return False
        if self.span_name is not None and not fnmatch.fnmatchcase(span.name, self.span_name):
            return False
        models = {str(a.get(sc.GEN_AI_REQUEST_MODEL)), str(a.get(sc.GEN_AI_RESPONSE_MODEL))}
        if self.model is not None and self.model not in models:
            return False
        return all(str(a.get(key)) == value for key, value in self.attributes.items())


class Label(BaseModel):
    """The feedback an example carries: a score in [0, 1], its kind and where it came from."""

    score: float
    kind: str
    source: str
    """``span``, ``trace`` or ``reward``."""
    comment: str | None = None


class FromTracesSummary(BaseModel):
    """What a build read and made: calls selected, matched, unmatched, ambiguous, without a
    reply; examples with feedback; split sizes; the commonest reasons calls did not match."""

    selected: int = 0
    matched: int = 0
    unmatched: int = 0
    ambiguous: int = 0
    no_reply: int = 0
    with_feedback: int = 0
    splits: dict[str, int] = Field(default_factory=dict)
    reasons: dict[str, int] = Field(default_factory=dict)

    def lines(self) -> list[str]:
        """The summary as the CLI prints it."""
        reasons = "; ".join(f"{reason} ({n})" for reason, n in self.reasons.items())
        examples = sum(self.splits.values())
        out = [
            f"selected {self.selected} chat calls: {self.matched} matched,"
            f" {self.unmatched} unmatched, {self.ambiguous} ambiguous, {self.no_reply} without"
            " a reply",
            f"{examples} examples, {self.with_feedback} with feedback;"
            f" splits by time: train {self.splits.get('train', 0)},"
            f" val {self.splits.get('val', 0)}, test {self.splits.get('test', 0)} (newest)",
        ]
        if reasons:
            out.append(f"not matched: {reasons}")
        return out


@dataclass
class TraceDataset:
    """The examples a build made, each with its split, and its summary."""

    examples: list[tuple[Split, Example]]
    summary: FromTracesSummary
    name: str = "traces"

    def rows(self) -> list[dict[str, Any]]:
        """The JSONL rows (``id``, ``input``, ``expected``, ``meta``, ``split``) emery loads."""
        return [{**example.model_dump(mode="json"), "split": split} for split, example in self]

    def dataset(self) -> Dataset:
        splits: dict[str, list[Example]] = {name: [] for name in SPLITS}
        for split, example in self:
            splits[split].append(example)
        return Dataset(name=self.name, **splits)

    def write(self, path: str | Path) -> Path:
        """Write the rows as JSONL (one example a line) and return the path."""
        target = Path(path)
        lines = [json.dumps(row, ensure_ascii=False) for row in self.rows()]
        target.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        return target

    def __iter__(self) -> Iterator[tuple[Split, Example]]:
        return iter(self.examples)


def select_calls(store: Store, selection: TraceSelection) -> list[SpanRecord]:
    """The chat spans ``selection`` admits, oldest first."""
    exact = selection.span_name
    if exact is not None and any(ch in exact for ch in "*?["):
        exact = None
    query = SpanFilter(name=exact, started_after=selection.since, started_before=selection.until)
    found: list[SpanRecord] = []
    offset = 0
    while True:
        page = store.list_spans(query, limit=PAGE, offset=offset)
        found += [span for span in page.items if is_chat(span) and selection.admits(span)]
        offset += len(page.items)
        if not page.items or offset >= page.total:
            break
    return sorted(found, key=lambda span: (span.start_time, span.trace_id, span.span_id))


def _latest(records: Sequence[FeedbackRecord]) -> FeedbackRecord | None:
    return records[-1] if records else None


def _label(record: FeedbackRecord, source: str) -> Label:
    return Label(score=record.score, kind=record.kind, source=source, comment=record.comment)


def _reward(span: SpanRecord) -> float | None:
    value = span.attributes.get(sc.REWARD_VALUE)
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return None
    return min(1.0, max(0.0, float(value)))


def call_labels(store: Store, calls: Sequence[SpanRecord]) -> dict[tuple[str, str], Label]:
    """The label of each call that has feedback, by (trace id, span id)."""
    traces = sorted({call.trace_id for call in calls})
    stored: dict[str, list[FeedbackRecord]] = {}
    for record in store.list_feedback(traces):  # oldest first
        stored.setdefault(record.trace_id, []).append(record)
    labels: dict[tuple[str, str], Label] = {}
    for trace_id in traces:
        spans = store.list_spans(SpanFilter(trace_id=trace_id), limit=None).items
        records = stored.get(trace_id, [])
        for call in (c for c in calls if c.trace_id == trace_id):
            label = _label_of(call, spans, records)
            if label is not None:
                labels[(call.trace_id, call.span_id)] = label
    return labels


def _label_of(
    call: SpanRecord, spans: Sequence[SpanRecord], records: Sequence[FeedbackRecord]
) -> Label | None:
    parents = {span.span_id: span.parent_id for span in spans}
    by_span: dict[str, list[FeedbackRecord]] = {}
    for record in records:
        by_span.setdefault(record.span_id or "", []).append(record)
    node: str | None = call.span_id
    seen: set[str] = set()
    while node is not None and node not in seen:  # the call's span, then each one above it
        seen.add(node)
        found = _latest(by_span.get(node, []))
        if found is not None:
            return _label(found, "span")
        node = parents.get(node)
    whole = _latest(by_span.get("", []))
    if whole is not None:
        return _label(whole, "trace")
    return _reward_label(call, spans)


def _reward_label(call: SpanRecord, spans: Sequence[SpanRecord]) -> Label | None:
    """The reward a call earned: a reward span under it, else the last reward span after it
    and before the next chat call of the trace."""
    ordered = sorted(spans, key=lambda s: (s.start_time, s.sequence or 0))
    reward: float | None = None
    after = False
    for span in ordered:
        if span.span_id == call.span_id:
            after = True
            continue
        if span.name == sc.REWARD_SPAN and span.parent_id == call.span_id:
            reward = _reward(span)
            break
        if not after:
            continue
        if is_chat(span):
            break
        if span.name == sc.REWARD_SPAN and (value := _reward(span)) is not None:
            reward = value
    return None if reward is None else Label(score=reward, kind="reward", source="reward")


def time_split(count: int, fractions: SplitFractions = TIME_FRACTIONS) -> list[Split]:
    """The split of each of ``count`` items in time order: the oldest train, then val, the
    newest test, in the shares ``fractions`` gives (rounded)."""
    total = fractions.train + fractions.val + fractions.test
    test = round(count * fractions.test / total)
    val = round(count * fractions.val / total)
    val = min(val, count - test)
    train = count - test - val
    counts: dict[Split, int] = {"train": train, "val": val, "test": test}
    return [split for split in SPLITS for _ in range(counts[split])]


@dataclass
class _Build:
    template: TraceTemplate
    redactor: Redactor
    summary: FromTracesSummary = field(default_factory=FromTracesSummary)
    reasons: Counter[str] = field(default_factory=Counter)

    def example(self, call: SpanRecord, label: Label | None) -> Example | None:
        reply = response_message(call)
        content = reply.get("content") if reply is not None else None
        if not isinstance(content, str):
            self.summary.no_reply += 1
            return None
        found = self.template.match(request_messages(call))
        if found.status != "matched" or found.fields is None:
            setattr(self.summary, found.status, getattr(self.summary, found.status) + 1)
            self.reasons[found.reason] += 1
            return None
        self.summary.matched += 1
        a = call.attributes
        meta: dict[str, Any] = {
            "trace_id": call.trace_id,
            "span_id": call.span_id,
            "time": call.start_time.isoformat(),
            "model": a.get(sc.GEN_AI_RESPONSE_MODEL) or a.get(sc.GEN_AI_REQUEST_MODEL),
        }
        if sc.SERVICE_NAME in a:
            meta["service"] = a[sc.SERVICE_NAME]
        if label is not None:
            if label.comment is not None:
                label = label.model_copy(update={"comment": self.redactor(label.comment)})
            meta["feedback"] = label.model_dump(exclude_none=True)
        return Example(
            id=call.span_id,
            input=self.redactor(found.fields),
            expected=self.redactor(content),
            meta=meta,
        )


def dataset_from_traces(
    store: Store,
    template: TraceTemplate,
    selection: TraceSelection | None = None,
    *,
    redactor: Redactor | None = None,
    fractions: SplitFractions = TIME_FRACTIONS,
    labeled_only: bool = False,
    name: str = "traces",
) -> TraceDataset:
    """Examples from the chat calls ``selection`` admits (see the module docstring)."""
    calls = select_calls(store, selection or TraceSelection())
    labels = call_labels(store, calls)
    build = _Build(template, redactor or Redactor())
    build.summary.selected = len(calls)
    examples: list[Example] = []
    for call in calls:
        example = build.example(call, labels.get((call.trace_id, call.span_id)))
        if example is None or (labeled_only and "feedback" not in example.meta):
            continue
        examples.append(example)
    if len({e.id for e in examples}) < len(examples):  # one span id in two traces
        examples = [e.model_copy(update={"id": f"{e.meta['trace_id']}-{e.id}"}) for e in examples]
    splits = time_split(len(examples), fractions)
    summary = build.summary
    summary.with_feedback = sum("feedback" in e.meta for e in examples)
    summary.splits = {name: splits.count(name) for name in SPLITS}
    summary.reasons = dict(build.reasons.most_common(3))
    return TraceDataset(list(zip(splits, examples, strict=True)), summary, name)


def parse_attribute(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` as a pair; ConfigError otherwise."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"attribute filter {text!r} must be KEY=VALUE")
    return key.strip(), value
