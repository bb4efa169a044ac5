"""``POST /systems/NAME/run``: a published version's whole system (``reports.served``) run
on the input fields a request sends, the output answered as JSON and the run recorded as
an application trace (``X-Emery-Service`` names the application; a ``traceparent`` header
puts the run in the caller's trace).

A version is built once per server process, on its first request, and kept; the latest
version is looked up on each request, so a new ``emery publish`` is served at once.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from emery.reports import published
from emery.reports.served import ServedSystem, run_and_record
from emery.store.protocol import Store
from emery.tracing.application_spans import CallOrigin

PromptName = Annotated[str, Path(pattern=f"^{published.NAME_PATTERN.pattern}$")]
VersionQuery = Annotated[int | None, Query(ge=1, le=published.MAX_VERSION)]


class RunRequest(BaseModel):
    """The input fields of one run."""

    input: dict[str, Any] = Field(examples=[{"question": "Tom has 3 apples..."}])


def systems_router(store: Store) -> APIRouter:
    """The route that runs published systems over ``store``."""
    router = APIRouter(tags=["systems"])
    built: dict[tuple[str, int], ServedSystem] = {}

    def served(name: str, version: int | None) -> ServedSystem:
        prompt = published.show(store, name, version)
        key = (prompt.name, prompt.version)
        if key not in built:
            built[key] = ServedSystem.of(prompt, store)
        return built[key]

    @router.post("/systems/{name}/run")
    async def run_system(
        request: Request,
        name: PromptName,
        body: RunRequest,
        version: VersionQuery = None,
    ) -> dict[str, Any]:
        """Run version ``version`` (default: the latest) of the published system ``name``
        on ``{"input": {field: value, ...}}``: ``output`` as the system parses it (null
        when the run failed, with ``error``), the ``version`` run and the ``trace_id``."""
        system = await run_in_threadpool(served, name, version)
        origin = CallOrigin.from_headers(request.headers)
        answer = await run_and_record(system, body.input, store, origin)
        return {
            "name": system.prompt.name,
            "version": system.prompt.version,
            "output": answer.output,
            "error": answer.error,
            "trace_id": answer.trace_id,
        }

    return router
