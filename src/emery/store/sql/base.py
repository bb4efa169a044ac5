"""The SQL plumbing every store table module uses: transactions, upserts, paging, sorting."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from typing import Any

from sqlalchemy import Connection, Engine, Select, Table, func, literal, nulls_last, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.sql.elements import ColumnElement

from emery.core.errors import EmeryError
from emery.store.errors import store_errors


def now() -> float:
    """The current UNIX time, as stored in every ``*_at`` column."""
    return time.time()


def database_now() -> ColumnElement[Any]:
    """PostgreSQL's clock as a UNIX time, a column of a statement: the transaction's
    start (``now()``), so every statement of one transaction reads the same time."""
    return func.extract("epoch", func.now())


class SqlBase:
    """An SQLAlchemy engine with the store's transaction discipline.

    Writes open their transaction with ``BEGIN IMMEDIATE`` on SQLite (set up by the backend),
    so two processes never deadlock upgrading a read lock; ``lock`` serializes every
    transaction of a store that shares one connection (the in-memory store).
    """

    def __init__(self, engine: Engine, *, url: str, lock: threading.RLock | None = None) -> None:
        self.engine = engine
        self.url = url
        self._lock = lock
        self._statements: dict[tuple[Any, ...], Any] = {}
        self.clock: Callable[[], float] | None = None
        """A UNIX time the store uses instead of its own (``store_time``); a test sets it
        to expire a lease or age a heartbeat without waiting."""

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    def store_time(self, conn: Connection) -> float:
        """The store's clock, which stamps the queue's claims, heartbeats and ends and a
        job owner's heartbeats, and measures leases and heartbeat ages: PostgreSQL's own
        clock (the transaction's start), so processes on machines whose clocks differ
        agree on every lease and on which job owner is alive; this process's clock for
        SQLite (one machine) and memory stores; ``clock`` when a test sets one."""
        if self.clock is not None:
            return self.clock()
        if self.dialect == "postgresql":
            return float(conn.execute(select(database_now())).scalar_one())
        return now()

    def store_now(self) -> ColumnElement[Any]:
        """``store_time`` as a column of a query, read with its rows (no query of its own)."""
        if self.clock is not None:
            return literal(self.clock())
        if self.dialect == "postgresql":
            return database_now()
        return literal(now())

    @property
    def clock_in_sql(self) -> bool:
        """Whether ``store_time`` is the database's own clock (PostgreSQL, no ``clock``
        set), which a statement built once can read itself (``database_now``) rather
        than be given: the same time a ``store_time`` in its transaction returns."""
        return self.clock is None and self.dialect == "postgresql"

    @contextmanager
    def _tx(self, *, write: bool = False) -> Iterator[Connection]:
        """One transaction: committed on success, rolled back on any exception."""
        guard = self._lock if self._lock is not None else nullcontext()
        with store_errors(self.url), guard, self.engine.connect() as conn:
            if write:
                conn.execution_options(emery_write=True)
            with conn.begin():
                yield conn

    def close(self) -> None:
        """Release every pooled connection."""
        self.engine.dispose()

    def insert_ignore(
        self,
        conn: Connection,
        table: Table,
        rows: Sequence[dict[str, Any]],
        keys: Sequence[str] | None,
    ) -> None:
        """Insert ``rows``, skipping any whose ``keys`` already exist (``None``: skipping any
        that would break a unique constraint)."""
        if not rows:
            return
        key = ("ignore", table.name, tuple(keys or ()))
        stmt = self._statements.get(key)
        if stmt is None:
            stmt = self._insert(table).on_conflict_do_nothing(
                index_elements=list(keys) if keys else None
            )
            self._statements[key] = stmt
        conn.execute(stmt, rows)

    def upsert(
        self, conn: Connection, table: Table, rows: Sequence[dict[str, Any]], keys: Sequence[str]
    ) -> None:
        """Insert ``rows``, replacing the other columns of rows whose ``keys`` exist."""
        if not rows:
            return
        columns = tuple(name for name in rows[0] if name not in keys)
        key = ("upsert", table.name, tuple(keys), columns)
        stmt = self._statements.get(key)
        if stmt is None:
            insert = self._insert(table)
            updates = {name: insert.excluded[name] for name in columns}
            stmt = insert.on_conflict_do_update(index_elements=list(keys), set_=updates)
            self._statements[key] = stmt
        conn.execute(stmt, rows)

    def _insert(self, table: Table) -> Any:
        if self.dialect == "postgresql":
            return postgresql.insert(table)
        if self.dialect == "sqlite":
            return sqlite.insert(table)
        raise EmeryError(f"unsupported database dialect {self.dialect!r}")


def order_by(
    stmt: Select[Any], columns: Mapping[str, ColumnElement[Any]], sort: str | None, default: str
) -> Select[Any]:
    """Apply ``sort`` (``name`` or ``-name``, comma separated) over the allowed ``columns``."""
    for part in (sort or default).split(","):
        part = part.strip()
        if not part:
            continue
        descending = part.startswith("-")
        name = part.lstrip("-+")
        column = columns.get(name)
        if column is None:
            raise EmeryError(f"cannot sort by {name!r}; choose one of {', '.join(sorted(columns))}")
        stmt = stmt.order_by(nulls_last(column.desc() if descending else column.asc()))
    return stmt


def paged(
    conn: Connection, stmt: Select[Any], limit: int | None, offset: int
) -> tuple[list[Any], int]:
    """The rows of one page of ``stmt`` and the number of rows of the whole query."""
    total = conn.execute(select(func.count()).select_from(stmt.order_by(None).subquery())).scalar()
    if limit is not None:
        stmt = stmt.limit(limit)
    if offset:
        stmt = stmt.offset(offset)
    return list(conn.execute(stmt)), int(total or 0)
