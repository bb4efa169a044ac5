"""``POST /systems/NAME/run``: a published version's whole system (``reports.served``) run
on the input fields a request sends, the output answered as JSON and the run recorded as
an application trace (``X-Emery-Service`` names the application; a ``traceparent`` header
puts the run in the caller's trace).

A request names a version, an alias (``production``: a version, or a split between
versions, ``reports.aliases``; the ``X-Emery-Split-Key`` header keeps one user on one
version of a split) or neither (the latest). A version is built once per server process,
on its first request, and kept; the alias and the latest are looked up on each request,
so a new ``emery publish`` or alias is served at once.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from emery.reports import aliases, published
from emery.reports.served import ServedSystem, run_and_record
from emery.reports.version_scores import version_scores
from emery.store.protocol import Store
from emery.tracing.application_spans import CallOrigin

PromptName = Annotated[str, Path(pattern=f"^{published.NAME_PATTERN.pattern}$")]
VersionQuery = Annotated[int | None, Query(ge=1, le=published.MAX_VERSION)]
AliasQuery = Annotated[str | None, Query(pattern=f"^{aliases.ALIAS_PATTERN.pattern}$")]
SPLIT_KEY_HEADER = "x-emery-split-key"


class RunRequest(BaseModel):
    """The input fields of one run."""

    input: dict[str, Any] = Field(examples=[{"question": "Tom has 3 apples..."}])


def systems_router(store: Store) -> APIRouter:
    """The route that runs published systems over ``store``."""
    router = APIRouter(tags=["systems"])
    built: dict[tuple[str, int], ServedSystem] = {}

    def served(name: str, version: int | None, alias: str | None, key: str | None) -> ServedSystem:
        prompt = aliases.resolve(store, name, version=version, alias=alias, key=key)
        at = (prompt.name, prompt.version)
        if at not in built:
            built[at] = ServedSystem.of(prompt, store)
        return built[at]

    @router.post("/systems/{name}/run")
    async def run_system(
        request: Request,
        name: PromptName,
        body: RunRequest,
        version: VersionQuery = None,
        alias: AliasQuery = None,
    ) -> dict[str, Any]:
        """Run version ``version`` (or the one ``alias`` picks; default: the latest) of the
        published system ``name`` on ``{"input": {field: value, ...}}``: ``output`` as the
        system parses it (null when the run failed, with ``error``), the ``version`` run
        and the ``trace_id``."""
        key = request.headers.get(SPLIT_KEY_HEADER)
        system = await run_in_threadpool(served, name, version, alias, key)
        origin = CallOrigin.from_headers(request.headers)
        answer = await run_and_record(system, body.input, store, origin)
        return {
            "name": system.prompt.name,
            "version": system.prompt.version,
            "output": answer.output,
            "error": answer.error,
            "trace_id": answer.trace_id,
        }

    @router.get("/api/prompts/{name}/scores", tags=["prompts"])
    def scores(name: PromptName) -> dict[str, Any]:
        """Each version's live traffic: runs served here, failed runs, runs with feedback
        and the mean feedback score with its 95% interval (as ``emery prompts scores``)."""
        rows = version_scores(store, name)
        return {"name": name, "versions": [row.model_dump(mode="json") for row in rows]}

    return router
