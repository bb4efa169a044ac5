"""The three stores and ``open_store``: SQLite file (default), in-memory and PostgreSQL."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, inspect
from sqlalchemy.exc import ArgumentError
from sqlalchemy.pool import NullPool, StaticPool

from emery.core.errors import ConfigError, StoreError
from emery.store.errors import store_errors, store_label
from emery.store.migrate import ensure_schema, refuse_foreign
from emery.store.sql.store import SqlStore

DEFAULT_PATH = Path(".emery") / "emery.db"
STORE_ENV = "EMERY_STORE"
BUSY_TIMEOUT_MS = 30_000
CONNECT_TIMEOUT_S = 10


def _sqlite_engine(url: str, **kwargs: Any) -> Engine:
    engine = create_engine(url, **kwargs)

    @event.listens_for(engine, "connect")
    def _connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy's "begin" event emit BEGIN itself (the driver would defer it).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(conn: Any) -> None:
        write = conn.get_execution_options().get("emery_write", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

    return engine


_CHECKED: set[Path] = set()
"""The SQLite files ``quick_check`` passed in this process."""
_CHECKED_LOCK = threading.Lock()


def _refuse_foreign_file(path: Path, url: str) -> None:
    """Refuse an existing database file of another program, or a damaged one, before the
    store connects: its connection settings switch the file to WAL mode, which is already
    a write. A file is checked once per process (``PRAGMA quick_check``: every page read
    once, about a second per GB), so a truncated or overwritten store is one line at open,
    never a half-read job later."""
    try:
        if path.stat().st_size == 0:
            return
    except OSError:
        return  # no file yet, or one the store's own connection will report on
    probe = create_engine(url, poolclass=NullPool, connect_args={"timeout": BUSY_TIMEOUT_MS / 1000})
    try:
        with store_errors(url), probe.connect() as conn:
            tables = inspect(conn).get_table_names()
            refuse_foreign(tables, store_label(url))
            _quick_check(conn, path, url)
    finally:
        probe.dispose()


def _quick_check(conn: Any, path: Path, url: str) -> None:
    key = path.resolve()
    with _CHECKED_LOCK:
        if key in _CHECKED:
            return
    # a page it cannot read at all raises "malformed" (see ``store.errors``)
    rows = [str(row[0]) for row in conn.exec_driver_sql("PRAGMA quick_check").fetchall()]
    if rows != ["ok"]:
        found = [
            line.strip()
            for row in rows
            for line in row.splitlines()
            if line.strip() and not line.startswith("***")  # "*** in database main ***"
        ]
        first = found[0] if found else "no answer"
        more = f" (and {len(found) - 1} more problems)" if len(found) > 1 else ""
        raise StoreError(
            f"the store {store_label(url)} is damaged (PRAGMA quick_check: {first}{more}):"
            " restore it from a backup"
        )
    with _CHECKED_LOCK:
        _CHECKED.add(key)


class SQLiteStore(SqlStore):
    """The default store: one SQLite file in WAL mode with a busy timeout, shared safely by
    the engine and CLI processes on one machine."""

    def __init__(self, path: str | Path = DEFAULT_PATH) -> None:
        path = Path(path).expanduser()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            raise StoreError(
                f"cannot create the store's folder {path.parent}: a file is in the way"
            ) from None
        except OSError as exc:
            raise StoreError(
                f"cannot create the store's folder {path.parent}: {exc.strerror or exc}"
            ) from None
        if path.is_dir():
            raise StoreError(f"the store {path} is a folder: give a file path")
        self.path = path
        url = f"sqlite:///{path}"
        _refuse_foreign_file(path, url)
        engine = _sqlite_engine(url, connect_args={"timeout": BUSY_TIMEOUT_MS / 1000})
        super().__init__(engine, url=url)
        with store_errors(url):
            ensure_schema(engine)


class MemoryStore(SqlStore):
    """A store that lives as long as the object: SQLite in memory on one shared connection,
    the same code path as the file store. For tests and throwaway runs in one process."""

    def __init__(self) -> None:
        engine = _sqlite_engine(
            "sqlite://", connect_args={"check_same_thread": False}, poolclass=StaticPool
        )
        super().__init__(engine, url="memory://", lock=threading.RLock())
        ensure_schema(engine)


class PostgresStore(SqlStore):
    """The store on a PostgreSQL server (psycopg 3), for several machines."""

    def __init__(self, url: str) -> None:
        if url.startswith("postgresql://") or url.startswith("postgres://"):
            url = "postgresql+psycopg://" + url.split("://", 1)[1]
        try:
            engine = create_engine(
                url,
                pool_pre_ping=True,
                pool_size=5,
                max_overflow=10,
                connect_args={"connect_timeout": CONNECT_TIMEOUT_S},
            )
        except ImportError as exc:
            raise ConfigError(
                "the PostgreSQL store needs psycopg: pip install 'emery[postgres]'"
            ) from exc
        except (ArgumentError, ValueError) as exc:
            raise ConfigError(f"invalid store URL {store_label(url)!r}: {exc}") from None
        super().__init__(engine, url=url)
        with store_errors(url):
            ensure_schema(engine)


def open_store(location: str | Path | None = None) -> SqlStore:
    """A store from a location: ``memory://``, ``sqlite:///path``, a plain file path,
    ``postgresql://user@host/db``; default ``$EMERY_STORE`` or ``./.emery/emery.db``."""
    text = _location_text(location)
    if text in _MEMORY:
        return MemoryStore()
    if text.startswith(_POSTGRES):
        return PostgresStore(text)
    path = store_file(text)
    if path is None:
        raise ConfigError(
            f"unknown store {text!r}: use a file path, sqlite:///PATH, memory:// or postgresql://"
        )
    return SQLiteStore(path)


_MEMORY = ("memory", "memory://", ":memory:")
_POSTGRES = ("postgresql", "postgres://")


def _location_text(location: str | Path | None) -> str:
    if location is None:
        location = os.environ.get(STORE_ENV) or DEFAULT_PATH
    return str(location)


def store_file(location: str | Path | None) -> Path | None:
    """The SQLite file a store location names (``open_store``'s default when None); None
    for ``memory://``, a PostgreSQL URL or an unknown scheme."""
    text = _location_text(location)
    if text in _MEMORY or text.startswith(_POSTGRES):
        return None
    if text.startswith("sqlite:///"):
        return reachable(Path(text.removeprefix("sqlite:///")).expanduser())
    return None if "://" in text else reachable(Path(text).expanduser())


def reachable(path: Path) -> Path:
    """``path``, once this user may look it up: a StoreError naming the store and the
    folder on its way that this user may not enter (a ``PermissionError`` from any later
    look at the file, before the store is opened or anything is written)."""
    try:
        path.stat()
    except PermissionError:
        folder = next((p for p in reversed(path.parents) if not os.access(p, os.X_OK)), path.parent)
        raise StoreError(
            f"the store {path} cannot be reached: this user may not enter its folder"
            f" {folder} (check the permissions)"
        ) from None
    except (OSError, ValueError):
        pass  # no file yet, or a name the store's own connection reports on
    return path
