"""``emery.prompt``: a published prompt's components for an application, from the store,
with a local copy of each fetched version for when the store cannot be reached.

The copies live in ``$EMERY_PROMPT_CACHE`` (default ``~/.cache/emery/prompts``), as
``NAME/vVERSION.json`` and ``NAME/latest.json`` (the latest version last fetched). A
store that answers is always asked: an unknown name or version is an error even when a
copy exists; only a store that cannot be opened or read (a missing SQLite file, a
database server that is down) falls back to the copy.
"""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path

from emery.core.errors import StoreError
from emery.reports import published
from emery.reports.published import PublishedPrompt, check_name, check_version
from emery.store.backends import open_store, store_file
from emery.store.protocol import Store

CACHE_ENV = "EMERY_PROMPT_CACHE"
DEFAULT_CACHE = "~/.cache/emery/prompts"
LATEST = "latest"

log = logging.getLogger(__name__)


def prompt(
    name: str, version: int | None = None, store: Store | str | Path | None = None
) -> dict[str, str]:
    """The components (component name → text) of version ``version`` of the published
    prompt ``name`` (default: the latest), read from ``store`` (a ``Store`` or a location;
    default ``$EMERY_STORE`` or ``./.emery/emery.db``), or from the local copy of it
    (``$EMERY_PROMPT_CACHE``, default ``~/.cache/emery/prompts``) when the store cannot
    be reached."""
    return published_prompt(name, version, store).components


def published_prompt(
    name: str, version: int | None = None, store: Store | str | Path | None = None
) -> PublishedPrompt:
    """The whole published version (components, demos, job, scores, diff); see ``prompt``."""
    check_name(name)
    check_version(version)
    try:
        found = _fetch(name, version, store)
    except StoreError as exc:
        path = cache_path(name, version)
        cached = _read(path)
        if cached is None:
            raise StoreError(f"{exc}; and no local copy of prompt {name!r} at {path}") from exc
        log.warning("%s: using the local copy of prompt %r at %s", exc, name, path)
        return cached
    _save(found, latest=version is None)
    return found


def cache_dir() -> Path:
    """Where fetched prompt versions are kept: ``$EMERY_PROMPT_CACHE`` or the default."""
    return Path(os.environ.get(CACHE_ENV) or DEFAULT_CACHE).expanduser()


def cache_path(name: str, version: int | None) -> Path:
    """The local copy of version ``version`` of ``name`` (None: the latest fetched)."""
    return cache_dir() / check_name(name) / f"{LATEST if version is None else f'v{version}'}.json"


def _fetch(name: str, version: int | None, store: Store | str | Path | None) -> PublishedPrompt:
    if store is not None and not isinstance(store, str | Path):
        return published.show(store, name, version)
    file = store_file(store)
    if file is not None and not file.is_file():  # do not create an empty store here
        raise StoreError(f"no store at {file}")
    opened = open_store(store)
    try:
        return published.show(opened, name, version)
    finally:
        opened.close()


def _read(path: Path) -> PublishedPrompt | None:
    try:
        return PublishedPrompt.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _save(prompt: PublishedPrompt, *, latest: bool) -> None:
    """Keep a copy of ``prompt``; a cache that cannot be written is logged, not raised."""
    text = prompt.model_dump_json(indent=2)
    targets = [cache_path(prompt.name, prompt.version)]
    if latest:
        targets.append(cache_path(prompt.name, None))
    try:
        for target in targets:
            _write_atomically(target, text)
    except OSError as exc:
        log.warning("cannot keep a local copy of prompt %r: %s", prompt.name, exc)


def _write_atomically(target: Path, text: str) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=target.parent, suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(text)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
