"""The rollout queue's vocabulary: how a queued rollout is marked and what it carries.

A job whose ``[runtime] executor`` is ``runners`` stores its rollouts with status
``queuing`` and ``metadata`` naming the executor, the candidate's resource (name and
version) and the lease; ``emery runner`` processes claim them (``QueueMixin``), heartbeat
the claimed attempt, and write the result into ``metadata["result"]``.
"""

from __future__ import annotations

from typing import Any

EXECUTOR_KEY = "executor"
RUNNERS = "runners"
RESOURCE_KEY = "resource"
VERSION_KEY = "resource_version"
LEASE_KEY = "lease_s"
RESULT_KEY = "result"
DEFAULT_LEASE_S = 30.0
LIVE_ATTEMPT = ("preparing", "running")
LIVE_ROLLOUT = ("preparing", "running")
FINAL_ROLLOUT = ("succeeded", "failed", "cancelled")


def candidate_resource(candidate_id: str) -> str:
    """The resource name a candidate is published under for runners."""
    return f"candidate:{candidate_id}"


def queue_metadata(resource: str, version: int, lease_s: float) -> dict[str, Any]:
    """The metadata of a rollout put in the queue."""
    return {
        EXECUTOR_KEY: RUNNERS,
        RESOURCE_KEY: resource,
        VERSION_KEY: version,
        LEASE_KEY: lease_s,
    }


def is_queued_rollout(metadata: dict[str, Any] | None) -> bool:
    """Whether a rollout with this metadata went through the queue."""
    return bool(metadata) and (metadata or {}).get(EXECUTOR_KEY) == RUNNERS
