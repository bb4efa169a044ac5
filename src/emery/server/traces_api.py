"""Production traces: feedback on a recorded trace or span (``POST /api/feedback``), and a
dataset built from the recorded chat calls (``POST /api/datasets/from-traces``)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from starlette.concurrency import run_in_threadpool

from emery.core.errors import ConfigError
from emery.core.feedback import FeedbackRecord, NewFeedback
from emery.sdk.traces import FromTracesRequest
from emery.store.protocol import Store


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
    async def from_traces(request: FromTracesRequest) -> dict[str, Any]:
        """The recorded chat calls the selection admits, as dataset rows (``id``,
        ``input``, ``expected``, ``meta``, ``split``) with the build's summary. The API
        takes a ``{field}`` template; a stage (a config file) is for the CLI and the SDK."""
        if request.stage is not None:
            raise ConfigError(
                "the API takes a {field} template, not a stage: a stage names a config file"
            )
        built = await run_in_threadpool(request.build, store)
        return {"summary": built.summary.model_dump(mode="json"), "rows": built.rows()}

    return router
