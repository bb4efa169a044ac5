"""``emery.load``: a published version's whole system as a callable in the application's
process, run as its job scored it (``reports.served``: the job's system, the published
candidate, the job's task model, the system's own parsing)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from emery.core.errors import EmeryError
from emery.reports import aliases
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
    name: str,
    version: int | None = None,
    store: Store | str | Path | None = None,
    *,
    alias: str | None = None,
    split_key: str | None = None,
) -> LoadedSystem:
    """Version ``version`` (or the one ``alias`` picks, for ``split_key`` when the alias
    splits traffic; default: the latest) of the published system ``name`` from ``store``
    (a ``Store`` or a location; default ``$EMERY_STORE`` or ``./.emery/emery.db``), ready
    to call. Its job's files and ``python/...`` modules must be reachable here, as for a
    runner."""
    if alias is not None:
        with _opened(store) as opened:
            version = aliases.resolve(opened, name, alias=alias, key=split_key).version
    prompt = published_prompt(name, version, store)
    if prompt.config is not None:
        return LoadedSystem(ServedSystem.of(prompt))
    with _opened(store) as opened:
        return LoadedSystem(ServedSystem.of(prompt, opened))


@contextmanager
def _opened(store: Store | str | Path | None) -> Iterator[Store]:
    """``store`` itself, or the store at that location, closed after."""
    if isinstance(store, Store):
        yield store
        return
    opened = open_store(store)
    try:
        yield opened
    finally:
        opened.close()
