"""Create the schema in a new database and bring an older one up to ``SCHEMA_VERSION``.

A migration is a function ``(connection) -> None`` that takes the schema from version
``n`` to ``n + 1``; ``MIGRATIONS[n]`` holds it. Each runs in its own transaction with the
version bump, so an interrupted upgrade leaves the database at a consistent version.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Connection, Engine, inspect, select

from emery.core.errors import EmeryError
from emery.store import schema as t

Migration = Callable[[Connection], None]
MIGRATIONS: dict[int, Migration] = {}


class SchemaError(EmeryError):
    """The database holds a schema this version of emery cannot use."""


def stored_version(conn: Connection) -> int | None:
    """The schema version recorded in the database, None for a database without emery tables."""
    if not inspect(conn).has_table(t.meta.name):
        return None
    value = conn.execute(select(t.meta.c.value).where(t.meta.c.key == "schema_version")).scalar()
    return None if value is None else int(value)


def ensure_schema(engine: Engine, *, target: int = t.SCHEMA_VERSION) -> int:
    """Create or upgrade the schema; returns the version the database is at."""
    with engine.connect() as conn:
        conn.execution_options(emery_write=True)
        with conn.begin():
            version = stored_version(conn)
            if version is None:
                t.metadata.create_all(conn)
                conn.execute(t.meta.insert().values(key="schema_version", value=str(target)))
                return target
    if version > target:
        raise SchemaError(
            f"the store was written by a newer emery (schema {version}, this one knows"
            f" {target}): upgrade emery"
        )
    while version < target:
        step = MIGRATIONS.get(version)
        if step is None:
            raise SchemaError(f"no migration from store schema {version} to {version + 1}")
        with engine.connect() as conn:
            conn.execution_options(emery_write=True)
            with conn.begin():
                if stored_version(conn) == version:  # another process may have migrated it
                    step(conn)
                    conn.execute(
                        t.meta.update()
                        .where(t.meta.c.key == "schema_version")
                        .values(value=str(version + 1))
                    )
        version += 1
    # Tables added by this version (new tables need no migration): create what is missing.
    t.metadata.create_all(engine, checkfirst=True)
    return version
