"""Query parameters shared by the API routes, bounded so that every value the schema
accepts is one the store can take (SQL integers are 64-bit)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query

SQL_INT_MAX = 2**63 - 1

Offset = Annotated[int, Query(ge=0, le=SQL_INT_MAX, description="Items to skip.")]
Since = Annotated[
    int, Query(ge=0, le=SQL_INT_MAX, description="Only events after this sequence number.")
]
