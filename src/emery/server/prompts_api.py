"""Published prompts for applications: each prompt's latest version, and one version of a
prompt in full (``emery publish`` makes them)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query

from emery.reports import published
from emery.store.protocol import Store

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
