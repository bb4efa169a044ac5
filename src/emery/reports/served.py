"""A published version run whole, as its job scored it: the job's system (a multi-stage
prompt program with its answer stage, a workflow graph, an RLM graph, any system a job
can optimize) rebuilt from the job's config, run under the published candidate with the
job's task model and the system's own parsing.

``ServedSystem.run`` takes the input fields, returns the output and records the run as
application traffic: one ``run NAME`` span (``service.name``, the prompt's name and
version, the input and output) with the LM calls of the run as its children, in a trace
of its own or under the caller's ``traceparent``. ``emery server`` serves it at
``POST /systems/NAME/run``; ``emery.load`` runs it in the application's process.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from emery.config.loading import job_config, stored_config
from emery.config.resolve import resolve_job, resolve_lm
from emery.config.schema import JobConfig
from emery.core.errors import ConfigError, EmeryError
from emery.core.models import Candidate, ChatMessage, Example
from emery.core.spans import SpanRecord
from emery.lm.base import LM, Completion
from emery.lm.wrapper import LMWrapper
from emery.reports.published import PublishedPrompt
from emery.store.protocol import Store
from emery.systems.base import RunContext, System
from emery.tracing import conventions as sc
from emery.tracing.application_spans import ApplicationCall, CallOrigin, SpanSink
from emery.tracing.chat_record import at, new_span_id, new_trace_id

log = logging.getLogger(__name__)

SERVED_SOURCE = "served"
NAME_ATTRIBUTE = "emery.prompt.name"
VERSION_ATTRIBUTE = "emery.prompt.version"
MAX_RECORDED_CHARS = 8000


@dataclass
class ServedRun:
    """What one run gave: the output (None when it failed), the error, and its trace."""

    output: Any
    error: str | None
    trace_id: str
    spans: list[SpanRecord] = field(default_factory=list)


class ServedSystem:
    """A published version of a system, ready to run (module doc)."""

    def __init__(
        self, prompt: PublishedPrompt, system: System, candidate: Candidate, lm: LM
    ) -> None:
        self.prompt, self.system, self.candidate, self.lm = prompt, system, candidate, lm

    @classmethod
    def of(cls, prompt: PublishedPrompt, store: Store | None = None) -> ServedSystem:
        """The system ``prompt``'s job optimized, under its published candidate, with the
        job's task model; the config recorded with the version, else the job's (from
        ``store``). An ``EmeryError`` when neither is there or it cannot be built here."""
        config, base_dir = _config(prompt, store)
        system = resolve_job(config, base_dir).system
        candidate = Candidate(components=dict(prompt.components), demos=dict(prompt.demos))
        lm = resolve_lm(config.lm.task)
        return cls(prompt, system, candidate, lm)

    async def run(self, inputs: dict[str, Any], origin: CallOrigin | None = None) -> ServedRun:
        """Run the system on ``inputs`` (its input fields); a missing field is a
        ``ConfigError`` naming it, a failed run a ``ServedRun`` with its error."""
        if not isinstance(inputs, dict):
            raise ConfigError("the input is an object of the system's input fields")
        self.system.check_inputs(set(inputs))
        origin = origin or CallOrigin()
        trace_id, parent_id = origin.parent or (new_trace_id(), None)
        root_id = new_span_id()
        child_origin = CallOrigin(
            service=origin.service,
            agent=origin.agent,
            parent=(trace_id, root_id),
            attributes={**origin.attributes, **self._attributes()},
        )
        traced = _TracedLM(self.lm, child_origin)
        example = Example(id=f"served-{uuid.uuid4().hex[:12]}", input=inputs)
        started = time.time_ns()
        result = await self.system.run(self.candidate, RunContext(lm=traced, example=example))
        root = SpanRecord(
            trace_id=trace_id,
            span_id=root_id,
            parent_id=parent_id,
            name=run_span_name(self.prompt.name),
            kind="server",
            start_time=at(started),
            end_time=at(time.time_ns()),
            attributes={
                sc.SERVICE_NAME: origin.service,
                **origin.attributes,
                **self._attributes(),
                "emery.input": _recorded(inputs),
                "emery.output": _recorded(result.output),
            },
            status="error" if result.error else "unset",
            status_message=result.error,
        )
        return ServedRun(
            output=None if result.error else result.output,
            error=result.error,
            trace_id=trace_id,
            spans=[root, *traced.spans],
        )

    def _attributes(self) -> dict[str, Any]:
        return {NAME_ATTRIBUTE: self.prompt.name, VERSION_ATTRIBUTE: self.prompt.version}


def run_span_name(name: str) -> str:
    """The name of the span of a run of the published system ``name``."""
    return f"run {name}"


async def run_and_record(
    served: ServedSystem,
    inputs: dict[str, Any],
    sink: SpanSink | None,
    origin: CallOrigin | None = None,
) -> ServedRun:
    """``served.run`` with its spans written to ``sink`` (a failing write loses the
    trace, not the answer)."""
    answer = await served.run(inputs, origin)
    if sink is not None:
        try:
            sink.add_spans(answer.spans)
        except Exception as exc:  # tracing must not fail an application's call
            log.warning("the trace of a run of %s was not stored: %s", served.prompt.name, exc)
    return answer


class _TracedLM(LMWrapper):
    """The task model with each call recorded as a child span of the run."""

    def __init__(self, inner: LM, origin: CallOrigin) -> None:
        super().__init__(inner)
        self.origin = origin
        self.spans: list[SpanRecord] = []

    async def _call(self, messages: Sequence[ChatMessage], params: dict[str, Any]) -> Completion:
        call = ApplicationCall(
            self.origin,
            model=self.inner.model,
            messages=messages,
            source=SERVED_SOURCE,
            temperature=params.get("temperature"),
            max_tokens=params.get("max_tokens"),
            stop=params.get("stop"),
        )
        try:
            completion = await self.inner.complete(messages, **params)
        except Exception as exc:
            self.spans.append(call.failed(exc))
            raise
        self.spans.append(call.finished(completion))
        return completion


def _config(prompt: PublishedPrompt, store: Store | None) -> tuple[JobConfig, Path | None]:
    base_dir = Path(prompt.base_dir) if prompt.base_dir else None
    if prompt.config is not None:
        source = f"prompt {prompt.name!r} version {prompt.version}"
        return stored_config(prompt.config, prompt.base_dir, source), base_dir
    if store is None:
        raise EmeryError(
            f"prompt {prompt.name!r} version {prompt.version} records no config: serving it"
            " needs the store of its job"
        )
    record = store.get_job(prompt.job_id)
    return job_config(record), Path(record.base_dir) if record.base_dir else None


def _recorded(value: Any) -> str:
    """``value`` as span attribute text (JSON, cut to ``MAX_RECORDED_CHARS``)."""
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text[:MAX_RECORDED_CHARS]
