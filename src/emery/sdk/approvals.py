"""``emery.Approvals``: a person's side of approval requests from Python, over a store (as
``emery approvals`` does) or over a running ``emery server`` (its ``/api`` approval routes).

Both ways answer with the same models (``Approval``, ``ApprovalReview``) and fail with the
same errors: ``NotFound`` for an unknown request or job, ``IllegalTransition`` for a
request that is decided already or whose job has ended, ``ConfigError`` for a bad decision
(an edit without text, new text on a rejection, ...). A server that cannot be reached is a
``StoreError``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote

import httpx

from emery.core.approvals import Approval
from emery.core.errors import ConfigError, EmeryError, IllegalTransition, StoreError
from emery.reports import approvals
from emery.reports.approvals import ApprovalReview
from emery.store.backends import open_store
from emery.store.protocol import Store
from emery.store.states import NotFound

TIMEOUT_S = 30.0
"""How long a request to the server may take."""


class ApprovalsBackend(Protocol):
    """Where the requests are read and decided."""

    def requests(self, job: str) -> list[Approval]: ...

    def review(self, approval_id: str) -> ApprovalReview: ...

    def decide(self, approval_id: str, decision: Mapping[str, Any]) -> Approval: ...

    def close(self) -> None: ...


class StoreBackend:
    """The requests in a store, decided as ``emery approvals`` decides them."""

    def __init__(self, store: Store | str | Path | None) -> None:
        self.store: Store
        if store is None or isinstance(store, str | Path):
            self.store, self._owned = open_store(store), True
        else:
            self.store, self._owned = store, False

    def requests(self, job: str) -> list[Approval]:
        return approvals.job_approvals(self.store, job)

    def review(self, approval_id: str) -> ApprovalReview:
        return approvals.review(self.store, approval_id)

    def decide(self, approval_id: str, decision: Mapping[str, Any]) -> Approval:
        options = {k: v for k, v in decision.items() if k != "action"}
        return approvals.decide(self.store, approval_id, decision["action"], **options)

    def close(self) -> None:
        if self._owned:
            self.store.close()


class ServerBackend:
    """The requests of a running ``emery server``, over its ``/api`` routes."""

    def __init__(self, server: str | httpx.Client, api_key: str | None) -> None:
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._owned = isinstance(server, str)
        if isinstance(server, str):
            if not server.startswith(("http://", "https://")):
                raise ConfigError(f"server {server!r} is not an http:// or https:// URL")
            self.client = httpx.Client(base_url=server, timeout=TIMEOUT_S)
        else:
            self.client = server

    def requests(self, job: str) -> list[Approval]:
        body = self._call("GET", f"/api/jobs/{_segment(job, 'job')}/approvals")
        return [Approval.model_validate(item) for item in body["approvals"]]

    def review(self, approval_id: str) -> ApprovalReview:
        body = self._call("GET", f"/api/approvals/{_segment(approval_id, 'approval request')}")
        return ApprovalReview.model_validate(body)

    def decide(self, approval_id: str, decision: Mapping[str, Any]) -> Approval:
        sent = {k: v for k, v in decision.items() if v is not None}
        path = f"/api/approvals/{_segment(approval_id, 'approval request')}"
        return Approval.model_validate(self._call("POST", path, sent))

    def close(self) -> None:
        if self._owned:
            self.client.close()

    def _call(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> Any:
        try:
            response = self.client.request(method, path, json=body, headers=self.headers)
        except httpx.HTTPError as exc:
            raise StoreError(f"cannot reach the server at {self.client.base_url}: {exc}") from exc
        if response.is_success:
            return response.json()
        raise _error(response)


def _segment(value: str, what: str) -> str:
    """``value`` as one URL path segment; ConfigError when it is blank."""
    if not value.strip():
        raise ConfigError(f"the {what} id is empty: give an id, a unique id prefix or a name")
    return quote(value, safe="")


def _error(response: httpx.Response) -> EmeryError:
    """The emery error a failed response stands for, with the server's message."""
    try:
        message = str(response.json()["detail"])
    except (ValueError, KeyError, TypeError):
        message = response.text.strip() or response.reason_phrase
    status = response.status_code
    if status == 404:
        return NotFound(message)
    if status == 409:
        return IllegalTransition(message)
    if status == 401:
        return ConfigError(f"the server refused the API key: {message}")
    if 400 <= status < 500:
        return ConfigError(message)
    return EmeryError(f"the server failed ({status}): {message}")


class Approvals:
    """Approval requests to list, review and decide.

    ``Approvals()`` reads the default store (``$EMERY_STORE`` or ``./.emery/emery.db``);
    ``Approvals(store)`` a ``Store`` or a store location; ``Approvals(server=URL,
    api_key=KEY)`` a running ``emery server`` (or ``server=`` an ``httpx.Client`` whose base
    URL is the server). Use it as a context manager, or ``close()`` it, to close what it
    opened."""

    def __init__(
        self,
        store: Store | str | Path | None = None,
        *,
        server: str | httpx.Client | None = None,
        api_key: str | None = None,
    ) -> None:
        if store is not None and server is not None:
            raise ConfigError("give a store or a server, not both")
        if api_key is not None and server is None:
            raise ConfigError("an API key is for a server: give server= with it")
        self.backend: ApprovalsBackend = (
            StoreBackend(store) if server is None else ServerBackend(server, api_key)
        )

    def __enter__(self) -> Approvals:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the store or connection this object opened (not one it was given)."""
        self.backend.close()

    def requests(self, job: str) -> list[Approval]:
        """Every request of ``job`` (id, id prefix or name), oldest first."""
        return self.backend.requests(job)

    def pending(self, job: str) -> list[Approval]:
        """The requests of ``job`` no one has decided yet, oldest first."""
        return [a for a in self.backend.requests(job) if a.status == "pending"]

    def review(self, approval_id: str) -> ApprovalReview:
        """The request with its candidate beside what it would replace: texts, diff, val
        scores with 95% intervals, their paired difference and sample outputs."""
        return self.backend.review(approval_id)

    def approve(self, approval_id: str) -> Approval:
        """Approve a pending request (a publish request is published at once)."""
        return self.backend.decide(approval_id, {"action": "approve"})

    def reject(self, approval_id: str, reason: str | None = None) -> Approval:
        """Reject a pending request; the search's proposal prompts show ``reason``."""
        return self.backend.decide(approval_id, {"action": "reject", "reason": reason})

    def edit(
        self,
        approval_id: str,
        text: str | None = None,
        *,
        component: str | None = None,
        edited: Mapping[str, str] | None = None,
        reason: str | None = None,
    ) -> Approval:
        """Replace a pending request's candidate by a person's text: ``text`` for
        ``component`` (or the candidate's only component), or ``edited`` (component →
        text); the job scores it as a child of the candidate."""
        decision = {
            "action": "edit",
            "text": text,
            "component": component,
            "edited": None if edited is None else dict(edited),
            "reason": reason,
        }
        return self.backend.decide(approval_id, decision)
