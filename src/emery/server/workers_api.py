"""``/api/workers``: the runners (``emery runner``) that have joined the store."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from emery.store.protocol import Store


def workers_router(store: Store) -> APIRouter:
    """The fleet route over ``store``."""
    router = APIRouter(prefix="/api/workers", tags=["workers"])

    @router.get("")
    def workers() -> dict[str, Any]:
        """Every runner the store has seen, oldest first: id, host, pid, status (idle, busy,
        stopped), the job of the rollouts it holds, what it said of itself (executor,
        concurrency), when it started and last beat, rollouts done and failed."""
        return {"workers": [w.model_dump(mode="json") for w in store.list_workers()]}

    return router
