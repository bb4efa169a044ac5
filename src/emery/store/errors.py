"""Database failures a user can fix (a bad path, a read-only file, a server that is down)
as one-line ``StoreError`` messages instead of driver tracebacks."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy.exc import DatabaseError, InterfaceError, OperationalError

from emery.core.errors import StoreError

_PASSWORD = re.compile(r"(://[^:/@]+:)[^@]*@")
# (fragment of the driver's message, what to tell the user); the first match wins.
_HINTS: tuple[tuple[str, str], ...] = (
    ("file is not a database", "is not an emery store (the file is not a SQLite database)"),
    ("readonly database", "is read-only: emery must write to it (check the permissions)"),
    ("read-only", "is read-only: emery must write to it (check the permissions)"),
    ("unable to open database file", "cannot be opened (check the path and its folder)"),
    ("database is locked", "is locked by another process: try again"),
    ("disk is full", "cannot be written: the disk is full"),
    ("disk i/o error", "cannot be read or written: disk I/O error"),
)


def store_label(url: str) -> str:
    """A store's location for messages: the file path, or the URL without its password."""
    if url.startswith("sqlite:///"):
        return url.removeprefix("sqlite:///")
    shown = _PASSWORD.sub(r"\1***@", url)
    return shown.replace("+psycopg://", "://", 1)


def describe(exc: DatabaseError | InterfaceError, label: str) -> str:
    """One line saying what went wrong with the store at ``label``."""
    detail = str(exc.orig if exc.orig is not None else exc).strip().splitlines()
    first = detail[0].strip() if detail else type(exc).__name__
    lowered = first.lower()
    for fragment, hint in _HINTS:
        if fragment in lowered:
            return f"the store {label} {hint}"
    if "connection" in lowered or "connect" in lowered:
        return f"cannot connect to the store {label}: {first}"
    return f"the store {label} failed: {first}"


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
        raise StoreError(describe(exc, store_label(url))) from exc
