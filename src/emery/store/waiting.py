"""Waiting out a store that is away for now (``StoreUnavailable``: a PostgreSQL server
restarting, a dropped connection, a SQLite lock held past the busy timeout).

``wait_out`` calls again with a bounded, growing delay (``StoreWait``: 0.25 s doubling to
5 s, for ``EMERY_STORE_WAIT_S`` seconds in all, 180 by default), telling ``on_wait`` "store
unavailable, retrying" before each wait; when the time is spent it raises
``StoreUnavailable`` with one line. ``WaitingStore`` makes every method of a store wait so.
Every other error passes at once.

A call is sent again whole, so it must be safe to repeat after a connection dropped at its
commit, when the store may have written it: ``commit_step`` recognizes a write it already
stored (``StepWrite.write_id``), the queue's claim, finish and requeue are conditional
updates, and trace rows are upserts or insert-or-ignore.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from emery.core.errors import ConfigError
from emery.store.errors import StoreUnavailable, store_unavailable

log = logging.getLogger(__name__)

T = TypeVar("T")
S = TypeVar("S")

STORE_WAIT_ENV = "EMERY_STORE_WAIT_S"
DEFAULT_WAIT_S = 180.0
RETRYING = "store unavailable, retrying"
"""How every wait for the store starts, in notes and the log."""


@dataclass(frozen=True)
class StoreWait:
    """How long to wait for a store that is away: ``total_s`` in all, in delays from
    ``first_s`` doubling up to ``max_s``."""

    total_s: float = DEFAULT_WAIT_S
    first_s: float = 0.25
    max_s: float = 5.0

    @classmethod
    def from_env(cls) -> StoreWait:
        """The wait ``EMERY_STORE_WAIT_S`` names (seconds; 0 waits not at all)."""
        text = os.environ.get(STORE_WAIT_ENV, "").strip()
        if not text:
            return cls()
        try:
            total = float(text)
        except ValueError:
            total = -1.0
        if not 0 <= total < float("inf"):
            raise ConfigError(f"{STORE_WAIT_ENV} must be a number of seconds, not {text!r}")
        return cls(total_s=total)

    def delays(self) -> Iterator[float]:
        """The waits between tries; they add up to ``total_s``."""
        left, delay = self.total_s, self.first_s
        while left > 1e-9:
            step = min(delay, left)
            yield step
            left -= step
            delay = min(delay * 2, self.max_s)


def first_line(exc: BaseException) -> str:
    """The first line of what ``exc`` (or the driver's error inside it) says."""
    lines = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def wait_out(
    call: Callable[[], T],
    wait: StoreWait,
    *,
    on_wait: Callable[[str], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """``call()``, called again while it says the store is away (see the module's
    docstring)."""
    delays = wait.delays()
    waited = 0.0
    while True:
        try:
            return call()
        except Exception as exc:
            if not store_unavailable(exc):
                raise
            delay = next(delays, None)
            if delay is None:
                raise StoreUnavailable(
                    f"the store was unavailable for {waited:.0f} s: {first_line(exc)}"
                ) from exc
            line = (
                f"{RETRYING} in {delay:g} s ({waited:.0f} of {wait.total_s:g} s waited):"
                f" {first_line(exc)}"
            )
            log.warning("%s", line)
            if on_wait is not None:
                try:
                    on_wait(line)
                except Exception:  # a display must never break a write
                    log.exception("a store-wait listener failed")
            sleep(delay)
            waited += delay


class WaitingStore:
    """``store`` with every public method waiting out ``StoreUnavailable`` (``wait_out``);
    other attributes pass through. ``waiting = False`` makes each call try once."""

    def __init__(
        self,
        store: Any,
        wait: StoreWait | None = None,
        *,
        on_wait: Callable[[str], None] | None = None,
    ) -> None:
        self.inner = store
        self.wait = wait if wait is not None else StoreWait.from_env()
        self.on_wait = on_wait
        self.waiting = True

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.inner, name)
        if name.startswith("_") or not callable(value):
            return value

        def waiting(*args: Any, **kwargs: Any) -> Any:
            if not self.waiting:
                return value(*args, **kwargs)
            return wait_out(lambda: value(*args, **kwargs), self.wait, on_wait=self.on_wait)

        return waiting


def waiting_store(store: S, **kwargs: Any) -> S:
    """``store`` as a ``WaitingStore``, typed as the store it wraps."""
    return cast(S, WaitingStore(store, **kwargs))
