"""Database failures a user can fix (a bad path, a read-only file, a server that is down)
as one-line ``StoreError`` messages instead of driver tracebacks.

Two of them pass by themselves, so they have classes of their own that a caller can wait
out: ``StoreFull`` (the disk under the store is full: SQLite's "database or disk is full",
PostgreSQL's ``disk_full``, an ``OSError`` ENOSPC; the write was not stored) and
``StoreUnavailable`` (the store cannot be reached for now: a refused, dropped or shut-down
PostgreSQL connection, a SQLite lock held past the busy timeout). Every other database
failure (a constraint, a bad statement, a corrupt file) is neither.
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy.exc import DatabaseError, InterfaceError, OperationalError

from emery.core.errors import StoreError

_PASSWORD = re.compile(r"(://[^:/@]+:)[^@]*@")
# (fragment of the driver's message, what to tell the user); the first match wins.
_HINTS: tuple[tuple[str, str], ...] = (
    ("file is not a database", "is not an emery store (the file is not a SQLite database)"),
    (
        "malformed",
        "is damaged (the database disk image is malformed): restore it from a backup",
    ),
    ("readonly database", "is read-only: emery must write to it (check the permissions)"),
    ("read-only", "is read-only: emery must write to it (check the permissions)"),
    ("unable to open database file", "cannot be opened (check the path and its folder)"),
    ("database is locked", "is locked by another process: try again"),
    ("disk is full", "cannot be written: the disk is full"),
    ("no space left on device", "cannot be written: the disk is full"),
    ("disk full", "cannot be written: the disk is full"),
    ("disk i/o error", "cannot be read or written: disk I/O error"),
)


class StoreFull(StoreError):
    """The disk under the store is full: nothing of the write was stored; the same write
    succeeds once space is freed."""


class StoreUnavailable(StoreError):
    """The store cannot be reached for now (a dropped, refused or shut-down connection, a
    lock held past the busy timeout); the same call succeeds once it is back."""


_FULL = ("disk is full", "no space left on device", "disk full")
_FULL_STATES = ("53100",)  # PostgreSQL's disk_full
_AWAY = (
    "database is locked",
    "connection refused",
    "could not connect",
    "server closed the connection",
    "terminating connection",
    "connection is closed",
    "connection already closed",
    "connection timed out",
    "the database system is starting up",
    "the database system is shutting down",
    "the database system is in recovery mode",
    "the database system is not yet accepting connections",
    "the database system is not accepting connections",
    "no connection to the server",
    "the connection is lost",
    "connection reset by peer",
    "could not receive data from server",
    "could not send data to server",
    "consuming input failed",
    "server conn crashed",
    "ssl syscall error",
)
# connection_exception (08...), admin/crash shutdown, cannot connect now
_AWAY_STATES = ("57P01", "57P02", "57P03")


def _driver_error(exc: BaseException) -> BaseException:
    orig = getattr(exc, "orig", None)
    return orig if isinstance(orig, BaseException) else exc


def disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` (a store's, SQLAlchemy's or a driver's error) says the disk under the
    store is full."""
    if isinstance(exc, StoreFull):
        return True
    if isinstance(exc, StoreError):
        return disk_full(exc.__cause__) if exc.__cause__ is not None else False
    if not isinstance(exc, DatabaseError | InterfaceError | OSError) and not _from_driver(exc):
        return False
    inner = _driver_error(exc)
    if isinstance(inner, OSError):
        return inner.errno == errno.ENOSPC
    if getattr(inner, "sqlstate", None) in _FULL_STATES:
        return True
    text = str(inner).lower()
    return any(fragment in text for fragment in _FULL)


def _from_driver(exc: BaseException) -> bool:
    """An error the database driver raised itself (sqlite3's, psycopg's)."""
    return type(exc).__module__.split(".")[0] in ("sqlite3", "psycopg")


def store_unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` says the store is away for now (see ``StoreUnavailable``), not that a
    statement, a constraint or the file itself is wrong."""
    if isinstance(exc, StoreUnavailable):
        return True
    if isinstance(exc, StoreError) or not isinstance(exc, OperationalError | InterfaceError):
        return False
    if getattr(exc, "connection_invalidated", False):
        return True
    inner = _driver_error(exc)
    state = getattr(inner, "sqlstate", None)
    if isinstance(state, str) and (state.startswith("08") or state in _AWAY_STATES):
        return True
    text = str(inner).lower()
    return any(fragment in text for fragment in _AWAY)


def store_label(url: str) -> str:
    """A store's location for messages: the file path, or the URL without its password."""
    if url.startswith("sqlite:///"):
        return url.removeprefix("sqlite:///")
    shown = _PASSWORD.sub(r"\1***@", url)
    return shown.replace("+psycopg://", "://", 1)


def describe(exc: DatabaseError | InterfaceError, label: str, file: Path | None = None) -> str:
    """One line saying what went wrong with the store at ``label`` (a SQLite ``file``:
    which file or folder this user may not write, when that is why)."""
    detail = str(exc.orig if exc.orig is not None else exc).strip().splitlines()
    first = detail[0].strip() if detail else type(exc).__name__
    lowered = first.lower()
    for fragment, hint in _HINTS:
        if fragment in lowered:
            unwritable = _unwritable(file) if file and fragment in _PERMISSIONS else None
            if unwritable is not None:
                return f"the store {label} is read-only: {unwritable} (check the permissions)"
            return f"the store {label} {hint}"
    if "connection" in lowered or "connect" in lowered:
        return f"cannot connect to the store {label}: {first}"
    return f"the store {label} failed: {first}"


_PERMISSIONS = ("readonly database", "read-only", "unable to open database file")
"""The driver's messages that a file or folder this user may not write can explain."""


def _unwritable(file: Path) -> str | None:
    """What of a SQLite store this user may not write (the file, the ``-wal`` or ``-shm``
    file beside it, or its folder, where SQLite makes those), or None when all are."""

    def denied(path: Path, mode: int) -> bool:
        try:
            return path.exists() and not os.access(path, mode, effective_ids=_EFFECTIVE)
        except OSError:
            return False

    for path in (file, file.with_name(file.name + "-wal"), file.with_name(file.name + "-shm")):
        if denied(path, os.W_OK):
            return f"this user may not write {path}"
    if denied(file.parent, os.W_OK | os.X_OK):
        return (
            f"this user may not write its folder {file.parent}, where SQLite keeps the"
            " store's -wal and -shm files"
        )
    return None


_EFFECTIVE = os.access in os.supports_effective_ids


def _is_user_fixable(exc: Exception) -> bool:
    # IntegrityError, ProgrammingError and DataError are emery's own bugs: keep their trace.
    return isinstance(exc, OperationalError | InterfaceError) or type(exc) is DatabaseError


@contextmanager
def store_errors(url: str) -> Iterator[None]:
    """Turn a database failure a user can fix, raised inside the block, into StoreError."""
    try:
        yield
    except (DatabaseError, InterfaceError) as exc:
        if not _is_user_fixable(exc):
            raise
        label = store_label(url)
        file = Path(label) if url.startswith("sqlite:///") and "?" not in label else None
        kind = (
            StoreFull
            if disk_full(exc)
            else StoreUnavailable
            if store_unavailable(exc)
            else StoreError
        )
        raise kind(describe(exc, label, file)) from exc
    except OSError as exc:
        if exc.errno != errno.ENOSPC:
            raise
        label = store_label(url)
        raise StoreFull(f"the store {label} cannot be written: the disk is full") from exc
