"""The SQLAlchemy Core implementation shared by every store backend."""

from emery.store.sql.store import SqlStore

__all__ = ["SqlStore"]
