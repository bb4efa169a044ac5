"""A persistent response cache so reruns of deterministic calls cost nothing."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from emery.core.errors import StoreError
from emery.core.hashing import canonical_json, content_hash
from emery.core.models import ChatMessage
from emery.lm.base import LM, Completion, sampling_params_of
from emery.lm.wrapper import LMWrapper


class ResponseCache:
    """Completions keyed by (model, messages, sampling params) in one SQLite file.

    By default every new entry is committed at once, so a job killed mid-step finds every
    answer it paid for when it resumes; in WAL mode with ``synchronous=NORMAL`` a commit
    is an append to the log (no fsync), some 20 microseconds. Writes can be batched
    instead: entries are served from memory at once and committed when ``batch_size`` are
    pending or ``flush_after_s`` has passed since the last commit (and on ``close``), at
    the price of losing the uncommitted ones to a crash. ``path=":memory:"`` keeps the
    cache in memory (tests).
    """

    def __init__(
        self, path: str | Path, *, batch_size: int = 64, flush_after_s: float = 0.0
    ) -> None:
        self.path = str(path)
        self.batch_size = batch_size
        self.flush_after_s = flush_after_s
        self._pending: dict[str, tuple[str, str, float]] = {}
        self._flushed_at = time.monotonic()
        self._lock = threading.Lock()
        try:
            self._db = self._open()
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(
                f"the response cache {self.path} cannot be opened for writing ({exc}):"
                " set runtime.workdir to a writable folder"
            ) from None

    def _open(self) -> sqlite3.Connection:
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, check_same_thread=False, timeout=30.0)
        with self._lock, db:
            if self.path != ":memory:":
                db.execute("PRAGMA journal_mode=WAL")
                # Durable against a killed process (the OS holds the log); only a power
                # loss can drop the last commits, which the next run simply pays again.
                db.execute("PRAGMA synchronous=NORMAL")
            db.execute(
                "CREATE TABLE IF NOT EXISTS lm_cache ("
                " key TEXT PRIMARY KEY, model TEXT NOT NULL, completion TEXT NOT NULL,"
                " created_at REAL NOT NULL)"
            )
        return db

    @staticmethod
    def key(model: str, messages: Sequence[ChatMessage], params: dict[str, Any]) -> str:
        return content_hash({"model": model, "messages": list(messages), "params": params}, 64)

    def get(self, key: str) -> Completion | None:
        with self._lock:
            pending = self._pending.get(key)
            if pending is not None:
                text = pending[1]
            else:
                row = self._db.execute(
                    "SELECT completion FROM lm_cache WHERE key = ?", (key,)
                ).fetchone()
                if row is None:
                    return None
                text = row[0]
        return Completion.model_validate_json(text).model_copy(
            update={"cached": True, "latency_s": 0.0}
        )

    def put(self, key: str, completion: Completion) -> None:
        with self._lock:
            self._pending[key] = (completion.model, completion.model_dump_json(), time.time())
            due = time.monotonic() - self._flushed_at >= self.flush_after_s
            if due or len(self._pending) >= self.batch_size:
                self._flush_locked()

    def flush(self) -> None:
        """Commit every pending entry."""
        with self._lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        if self._pending:
            with self._db:
                self._db.executemany(
                    "INSERT OR REPLACE INTO lm_cache (key, model, completion, created_at)"
                    " VALUES (?, ?, ?, ?)",
                    [(key, *entry) for key, entry in self._pending.items()],
                )
            self._pending.clear()
        self._flushed_at = time.monotonic()

    def __len__(self) -> int:
        with self._lock:
            self._flush_locked()
            (count,) = self._db.execute("SELECT COUNT(*) FROM lm_cache").fetchone()
        return int(count)

    def close(self) -> None:
        with self._lock:
            self._flush_locked()
            self._db.close()


class CachedLM(LMWrapper):
    """Serves repeated calls from a ``ResponseCache``.

    Calls at temperature 0 are cached; sampled calls only when ``cache_sampled`` is set.
    """

    def __init__(self, inner: LM, cache: ResponseCache, *, cache_sampled: bool = False) -> None:
        super().__init__(inner)
        self.cache = cache
        self.cache_sampled = cache_sampled

    async def _call(self, messages: Sequence[ChatMessage], params: dict[str, Any]) -> Completion:
        if (params.get("temperature") or 0.0) != 0.0 and not self.cache_sampled:
            return await self.inner.complete(messages, **params)
        key = self.cache.key(self.model, messages, sampling_params_of(params))
        hit = self.cache.get(key)
        if hit is not None:
            return hit
        completion = await self.inner.complete(messages, **params)
        self.cache.put(key, completion)
        return completion


__all__ = ["CachedLM", "ResponseCache", "canonical_json"]
