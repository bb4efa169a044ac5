"""``POST /systems/NAME/run``: a published version's whole system (``reports.served``) run
on the input fields a request sends, the output answered as JSON and the run recorded as
an application trace (``X-Emery-Service`` names the application; a ``traceparent`` header
puts the run in the caller's trace).

A request names a version, an alias (``production``: a version, or a split between
versions, ``reports.aliases``; the ``X-Emery-Split-Key`` header keeps one user on one
version of a split) or neither (the latest). A version is built once per server process,
on its first request, and kept; the alias and the latest are looked up on each request,
so a new ``emery publish`` or alias is served at once. An alias with a scorer or a shadow
version (``reports.shadow``) has its run scored and its shadow run after the answer is
sent.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, BackgroundTasks, Path, Query, Request
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from emery.reports import aliases, published
from emery.reports.published_verifier import PublishedVerifier
from emery.reports.served import ServedSystem, run_and_record
from emery.reports.shadow import LiveScorer, after_answer
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
    scorers: dict[str, LiveScorer] = {}

    def system(name: str, version: int | None) -> ServedSystem:
        prompt = published.show(store, name, version)
        at = (prompt.name, prompt.version)
        if at not in built:
            built[at] = ServedSystem.of(prompt, store)
        return built[at]

    def scorer(label: str) -> LiveScorer:
        if label not in scorers:
            scorer_name, scorer_version = aliases.parse_scorer(label)
            judge = PublishedVerifier(system(scorer_name, scorer_version))
            scorers[label] = LiveScorer(judge, label)
        return scorers[label]

    def resolve(
        name: str, version: int | None, alias: str | None, key: str | None
    ) -> tuple[ServedSystem, aliases.AliasTarget | None]:
        if alias is None:
            return system(name, version), None
        if version is not None:
            aliases.resolve(store, name, version=version, alias=alias)  # says why not
        target = aliases.get_alias(store, name, alias)
        return system(name, target.pick(key)), target

    @router.post("/systems/{name}/run")
    async def run_system(
        request: Request,
        background: BackgroundTasks,
        name: PromptName,
        body: RunRequest,
        version: VersionQuery = None,
        alias: AliasQuery = None,
    ) -> dict[str, Any]:
        """Run version ``version`` (or the one ``alias`` picks; default: the latest) of the
        published system ``name`` on ``{"input": {field: value, ...}}``: ``output`` as the
        system parses it (null when the run failed, with ``error``), the ``version`` run
        and the ``trace_id``. An alias's scorer and shadow run after the answer."""
        key = request.headers.get(SPLIT_KEY_HEADER)
        served, target = await run_in_threadpool(resolve, name, version, alias, key)
        origin = CallOrigin.from_headers(request.headers)
        answer = await run_and_record(served, body.input, store, origin)
        if target is not None and (target.shadow is not None or target.scorer is not None):
            shadow = None
            if target.shadow is not None:
                shadow = await run_in_threadpool(system, name, target.shadow)
            judge = None
            if target.scorer is not None:
                judge = await run_in_threadpool(scorer, target.scorer)
            background.add_task(
                after_answer, served, answer, body.input, origin, store, shadow=shadow,
                scorer=judge,
            )  # fmt: skip
        return {
            "name": served.prompt.name,
            "version": served.prompt.version,
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
