"""Create the schema in a new database and bring an older one up to ``SCHEMA_VERSION``.

A migration is a function ``(connection) -> None`` that takes the schema from version
``n`` to ``n + 1``; ``MIGRATIONS[n]`` holds it. Each runs in its own transaction with the
version bump, so an interrupted upgrade leaves the database at a consistent version.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from sqlalchemy import Connection, Engine, inspect, select

from emery.core.errors import EmeryError
from emery.store import schema as t
from emery.store.errors import store_label

Migration = Callable[[Connection], None]


def _evaluation_key_with_content(conn: Connection) -> None:
    """Schema 1 → 2: the evaluation key gains the example's content hash."""
    if conn.dialect.name == "sqlite":  # SQLite cannot drop a constraint: copy the table
        conn.exec_driver_sql("DROP INDEX IF EXISTS ix_evaluations_job")
        conn.exec_driver_sql("ALTER TABLE evaluations RENAME TO evaluations_v1")
        t.evaluations.create(conn)
        columns = ", ".join(column.name for column in t.evaluations.columns)
        conn.exec_driver_sql(
            f"INSERT INTO evaluations ({columns}) SELECT {columns} FROM evaluations_v1"
        )
        conn.exec_driver_sql("DROP TABLE evaluations_v1")
        return
    conn.exec_driver_sql("ALTER TABLE evaluations DROP CONSTRAINT uq_evaluation_key")
    conn.exec_driver_sql(
        "ALTER TABLE evaluations ADD CONSTRAINT uq_evaluation_key"
        f" UNIQUE ({', '.join(t.EVALUATION_KEY)})"
    )


def _label(engine: Engine) -> str:
    return store_label(engine.url.render_as_string(hide_password=False))


MIGRATIONS: dict[int, Migration] = {1: _evaluation_key_with_content}


class SchemaError(EmeryError):
    """The database holds a schema this version of emery cannot use."""


def refuse_foreign(table_names: Collection[str], label: str) -> None:
    """SchemaError when a database holds tables but not emery's schema marker: it belongs
    to another program, and emery must not write its tables into it."""
    if not table_names or t.meta.name in table_names:
        return
    shown = ", ".join(sorted(table_names)[:5]) + (", ..." if len(table_names) > 5 else "")
    raise SchemaError(
        f"the store {label} is not an emery store: it holds another program's tables"
        f" ({shown}) and no {t.meta.name} table; give a new file or an emery store"
    )


def stored_version(conn: Connection) -> int | None:
    """The schema version recorded in the database, None for a database without emery tables."""
    if not inspect(conn).has_table(t.meta.name):
        return None
    value = conn.execute(select(t.meta.c.value).where(t.meta.c.key == "schema_version")).scalar()
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise SchemaError(
            f"the store's schema version {value!r} (table {t.meta.name}) is not a number:"
            " the store is damaged"
        ) from None


def ensure_schema(engine: Engine, *, target: int = t.SCHEMA_VERSION) -> int:
    """Create or upgrade the schema; returns the version the database is at."""
    with engine.connect() as conn:
        conn.execution_options(emery_write=True)
        with conn.begin():
            refuse_foreign(inspect(conn).get_table_names(), _label(engine))
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
