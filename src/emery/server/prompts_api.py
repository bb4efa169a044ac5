"""Published prompts for applications: each prompt's latest version, one version of a
prompt in full (``emery publish`` makes them), and the LM proxy route that sends an
application's chat as a published prompt's version was scored (its instruction, demos and
layout around the application's own turn)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from emery.core.errors import EmeryError
from emery.proxy.routes import ProxyBackend, error_response, handle_chat
from emery.reports import published
from emery.server.errors import status_of
from emery.store.protocol import Store
from emery.tracing import conventions as sc

PromptName = Annotated[str, Path(pattern=f"^{published.NAME_PATTERN.pattern}$")]
VersionQuery = Annotated[int | None, Query(ge=1, le=published.MAX_VERSION)]


def prompts_router(store: Store) -> APIRouter:
    """The published-prompt routes."""
    router = APIRouter(prefix="/api/prompts", tags=["prompts"])

    @router.get("")
    def latest_prompts() -> dict[str, Any]:
        """The latest version of every published prompt, by name."""
        latest = published.latest_versions(store)
        return {"prompts": [found.model_dump(mode="json") for found in latest]}

    @router.get("/{prompt}")
    def one_version(prompt: PromptName, version: VersionQuery = None) -> dict[str, Any]:
        """A version of the prompt (default: the latest): components, demos, the job and
        candidate it came from, its scores and its diff against the seed."""
        return published.show(store, prompt, version).model_dump(mode="json")

    @router.get("/{prompt}/versions")
    def every_version(prompt: PromptName) -> dict[str, Any]:
        """Every version of the prompt, oldest first."""
        every = published.versions(store, prompt)
        return {"name": prompt, "versions": [found.model_dump(mode="json") for found in every]}

    return router


def prompt_proxy_router(store: Store, backend: ProxyBackend) -> APIRouter:
    """``/prompts/NAME/v1/chat/completions``: the proxy's default model, called with the
    chat a published prompt's version makes of the application's messages."""
    router = APIRouter(tags=["lm-proxy"])

    @router.post("/prompts/{prompt}/v1/chat/completions")
    async def chat_with_prompt(
        request: Request,
        prompt: PromptName,
        version: VersionQuery = None,
        component: str | None = None,
    ) -> Response:
        """A chat completion of the application's messages as the prompt's version (of
        ``component``, or of its only component) was scored: its instruction (the
        application's own system message, if first, replaced), its demos and its layout
        around the application's turn (``PublishedPrompt.chat``); the call's recorded span
        names the prompt and version (``emery.prompt.name``, ``emery.prompt.version``)."""
        try:
            found = await run_in_threadpool(published.show, store, prompt, version)
            stage = found.component(component)
        except EmeryError as exc:
            status = status_of(exc)
            kind = "not_found" if status == 404 else "invalid_request_error"
            return error_response(status, str(exc), kind)
        used = {sc.PROMPT_NAME: found.name, sc.PROMPT_VERSION: found.version}
        return await handle_chat(backend, request, None, lambda m: found.chat(m, stage), used)

    return router
