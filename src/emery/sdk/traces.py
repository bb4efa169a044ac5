"""``emery.dataset_from_traces`` and ``emery.send_feedback``: recorded traces as a dataset,
and feedback on a trace sent after the fact. The CLI (``emery dataset from-traces``) and
the server (``POST /api/datasets/from-traces``, ``POST /api/feedback``) build on the same
``FromTracesRequest``."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from emery.config.loading import load_config
from emery.core.errors import ConfigError
from emery.core.feedback import FeedbackRecord, NewFeedback
from emery.core.validation import describe
from emery.data.from_traces import TIME_FRACTIONS, TraceDataset, TraceSelection
from emery.data.from_traces import dataset_from_traces as build_dataset
from emery.data.loaders import SplitFractions
from emery.data.redaction import Redactor
from emery.data.trace_template import TraceTemplate
from emery.store.backends import open_store
from emery.store.protocol import Store
from emery.systems.stages import PromptProgramConfig

_AGO = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_time(text: str, what: str = "time") -> datetime:
    """An ISO date or time (UTC when it names no zone), or a span back from now (``7d``,
    ``12h``, ``30m``); ConfigError otherwise."""
    value = text.strip()
    ago = _AGO.match(value)
    if ago:
        return datetime.now(UTC) - timedelta(**{_UNITS[ago.group(2)]: float(ago.group(1))})
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise ConfigError(
            f"{what} {text!r} is not an ISO date or time (2026-11-30, 2026-11-30T12:00)"
            " nor a span back from now (7d, 12h, 30m)"
        ) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def stage_template(spec: str) -> TraceTemplate:
    """The template of a prompt program's stage: ``CONFIG:STAGE``, or ``CONFIG`` when the
    program has one stage."""
    path, _, name = spec.rpartition(":") if ":" in spec else (spec, "", "")
    if not Path(path).is_file() and Path(spec).is_file():
        path, name = spec, ""
    config = load_config(path)
    system = config.system
    if not isinstance(system, PromptProgramConfig):
        raise ConfigError(f"{path}: the system is not a prompt program; give --template instead")
    stages = {stage.name: stage for stage in system.stages}
    if not name:
        if len(stages) != 1:
            raise ConfigError(
                f"{path} has {len(stages)} stages: name one as {path}:STAGE ({', '.join(stages)})"
            )
        name = next(iter(stages))
    if name not in stages:
        raise ConfigError(f"{path} has no stage {name!r} (stages: {', '.join(stages)})")
    return TraceTemplate.from_stage(stages[name])


class FromTracesRequest(BaseModel):
    """A dataset build as the CLI, the SDK and the API describe it: a template (a
    ``{field}`` text or a stage ``CONFIG:STAGE``), a selection, redaction regexes (or
    presets), split fractions and whether to keep only calls with feedback."""

    template: str | None = Field(default=None, json_schema_extra={"pattern": r"\{[A-Za-z_]\w*\}"})
    """A ``{field}`` template of the last user message."""
    stage: str | None = None
    """A prompt program's stage, ``CONFIG[:STAGE]`` (not through the API)."""
    selection: TraceSelection = Field(default_factory=TraceSelection)
    redact: list[str] = Field(default_factory=list)
    fractions: SplitFractions = TIME_FRACTIONS
    labeled_only: bool = False
    name: str = "traces"

    def trace_template(self) -> TraceTemplate:
        if (self.template is None) == (self.stage is None):
            raise ConfigError("give a template ({field} text) or a stage (CONFIG:STAGE), one")
        if self.template is not None:
            return TraceTemplate.from_text(self.template)
        return stage_template(str(self.stage))

    def build(
        self, store: Store, redact_function: Callable[[str], str] | None = None
    ) -> TraceDataset:
        """The dataset; ConfigError for a bad template, pattern or time range."""
        selection = self.selection
        if selection.since and selection.until and selection.since >= selection.until:
            raise ConfigError(
                f"the time range is empty: since {selection.since.isoformat()} is not before"
                f" until {selection.until.isoformat()}"
            )
        return build_dataset(
            store,
            self.trace_template(),
            selection,
            redactor=Redactor.of(self.redact, redact_function),
            fractions=self.fractions,
            labeled_only=self.labeled_only,
            name=self.name,
        )


def parse_fractions(text: str) -> SplitFractions:
    """``TRAIN,VAL,TEST`` shares (``0.6,0.2,0.2``); ConfigError otherwise."""
    parts = [part.strip() for part in text.split(",")]
    try:
        values = [float(part) for part in parts]
    except ValueError:
        values = []
    if len(values) != 3 or any(math.isnan(v) or v < 0 for v in values) or sum(values) <= 0:
        raise ConfigError(f"--split {text!r} must be three shares TRAIN,VAL,TEST like 0.6,0.2,0.2")
    return SplitFractions(train=values[0], val=values[1], test=values[2])


def _store(store: Store | str | Path | None) -> Store:
    return store if store is not None and not isinstance(store, str | Path) else open_store(store)


def dataset_from_traces(
    template: str | None = None,
    *,
    stage: str | None = None,
    store: Store | str | Path | None = None,
    redact: list[str] | None = None,
    redact_function: Callable[[str], str] | None = None,
    fractions: tuple[float, float, float] | None = None,
    labeled_only: bool = False,
    **selection: Any,
) -> TraceDataset:
    """Recorded chat calls as a dataset (``emery.data.from_traces``): ``template`` (a
    ``{field}`` text) or ``stage`` (``CONFIG:STAGE``) recovers the inputs; ``selection``
    takes ``TraceSelection``'s fields (``service``, ``span_name``, ``since``, ``until``,
    ``model``, ``attributes``); ``.dataset()`` is an ``emery.Dataset``, ``.write(path)``
    a JSONL file, ``.summary`` the counts."""
    try:
        request = FromTracesRequest(
            template=template,
            stage=stage,
            selection=TraceSelection(**selection),
            redact=list(redact or []),
            fractions=(
                SplitFractions(train=fractions[0], val=fractions[1], test=fractions[2])
                if fractions
                else TIME_FRACTIONS
            ),
            labeled_only=labeled_only,
        )
    except ValidationError as exc:
        raise ConfigError(describe(exc, FromTracesRequest)) from None
    return request.build(_store(store), redact_function)


def send_feedback(
    trace_id: str,
    *,
    span_id: str | None = None,
    score: float | None = None,
    thumb: str | None = None,
    comment: str | None = None,
    store: Store | str | Path | None = None,
) -> FeedbackRecord:
    """Store feedback on a recorded trace (or one of its spans): a ``score`` in [0, 1] or a
    ``thumb`` (``"up"``/``"down"``); datasets built from traces read it as the label."""
    try:
        new = NewFeedback.model_validate(
            {
                "trace_id": trace_id,
                "span_id": span_id,
                "score": score,
                "thumb": thumb,
                "comment": comment,
            }
        )
    except ValidationError as exc:
        raise ConfigError(describe(exc, NewFeedback, prefix="feedback")) from None
    return _store(store).add_feedback(FeedbackRecord.of(new))
