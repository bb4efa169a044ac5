"""``emery.load``: a published version's whole system as a callable in the application's
process, run as its job scored it (``reports.served``: the job's system, the published
candidate, the job's task model, the system's own parsing)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from emery.core.errors import EmeryError
from emery.reports.published import PublishedPrompt
from emery.reports.served import ServedSystem
from emery.sdk.prompts import published_prompt
from emery.store.backends import open_store
from emery.store.protocol import Store


class LoadedSystem:
    """A published version, called with its input fields: ``system(question="...")`` or
    ``system({"question": "..."})`` returns the output; ``await system.arun(...)`` from
    async code. A run that fails raises an ``EmeryError`` with its error."""

    def __init__(self, served: ServedSystem) -> None:
        self.served = served

    @property
    def prompt(self) -> PublishedPrompt:
        """The published version this runs (name, version, components, scores)."""
        return self.served.prompt

    def __call__(self, inputs: dict[str, Any] | None = None, /, **fields: Any) -> Any:
        return asyncio.run(self.arun(inputs, **fields))

    async def arun(self, inputs: dict[str, Any] | None = None, /, **fields: Any) -> Any:
        """The output of one run on ``inputs`` and ``fields`` together."""
        answer = await self.served.run({**(inputs or {}), **fields})
        if answer.error is not None:
            raise EmeryError(f"{self.prompt.name} v{self.prompt.version}: {answer.error}")
        return answer.output


def load(
    name: str, version: int | None = None, store: Store | str | Path | None = None
) -> LoadedSystem:
    """Version ``version`` (default: the latest) of the published system ``name`` from
    ``store`` (a ``Store`` or a location; default ``$EMERY_STORE`` or
    ``./.emery/emery.db``), ready to call. Its job's files and ``python/...`` modules must
    be reachable here, as for a runner."""
    prompt = published_prompt(name, version, store)
    if prompt.config is not None:
        return LoadedSystem(ServedSystem.of(prompt))
    opened = store if isinstance(store, Store) else open_store(store)
    try:
        return LoadedSystem(ServedSystem.of(prompt, opened))
    finally:
        if opened is not store:
            opened.close()
