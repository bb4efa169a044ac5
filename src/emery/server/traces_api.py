"""Production traces: feedback on a recorded trace or span (``POST /api/feedback``), and a
dataset built from the recorded chat calls (``POST /api/datasets/from-traces``)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from emery.core.feedback import FeedbackRecord, NewFeedback
from emery.data.from_traces import TIME_FRACTIONS, TraceSelection
from emery.data.loaders import SplitFractions
from emery.sdk.traces import FromTracesRequest
from emery.store.protocol import Store


class FromTracesBody(BaseModel):
    """A dataset build through the API: a ``{field}`` template of the last user message (a
    stage names a config file, which the API does not read), the selection, redaction
    regexes or presets, split shares by time and whether to keep only labeled calls."""

    model_config = ConfigDict(extra="forbid")

    template: str = Field(json_schema_extra={"pattern": r"\{[A-Za-z_]\w*\}"})
    selection: TraceSelection = Field(default_factory=TraceSelection)
    redact: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)
    fractions: SplitFractions = TIME_FRACTIONS
    labeled_only: bool = False

    def request(self) -> FromTracesRequest:
        return FromTracesRequest(
            template=self.template,
            selection=self.selection,
            redact=self.redact,
            fractions=self.fractions,
            labeled_only=self.labeled_only,
        )


def traces_router(store: Store) -> APIRouter:
    """The feedback and dataset-from-traces routes."""
    router = APIRouter(prefix="/api", tags=["traces"])

    @router.post("/feedback", status_code=201)
    def add_feedback(feedback: NewFeedback) -> dict[str, Any]:
        """Store feedback on a trace (``span_id``: on one span and the calls under it): a
        ``score`` in [0, 1] or a ``thumb`` (``up``/``down``). The trace need not be stored
        yet; a dataset built later reads the feedback as the label of its calls."""
        return store.add_feedback(FeedbackRecord.of(feedback)).model_dump(mode="json")

    @router.post("/datasets/from-traces")
    async def from_traces(body: FromTracesBody) -> dict[str, Any]:
        """The recorded chat calls the selection admits, as dataset rows (``id``,
        ``input``, ``expected``, ``meta``, ``split``) with the build's summary."""
        built = await run_in_threadpool(body.request().build, store)
        return {"summary": built.summary.model_dump(mode="json"), "rows": built.rows()}

    return router
