"""A running ``emery server`` over HTTP: create a job from a config, follow its events,
pause and resume it, read it, its candidates and its result. Used by ``emery train
--server URL`` and the other commands' ``--server``.

The API key is ``api_key``, else ``$EMERY_API_KEY`` (``.env`` included); every error the
server answers (or not reaching it) is an ``EmeryError`` of one line.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from typing import Any

import httpx

from emery.core.errors import EmeryError
from emery.core.events import Event

API_KEY_ENV = "EMERY_API_KEY"
SERVER_ENV = "EMERY_SERVER"
RECONNECTS = 5  # a dropped event stream is picked up where it left off this many times
CANDIDATE_SORTS = ("created_at", "failed", "generation", "n", "ordinal", "score")
"""What ``/api/jobs/J/scores`` sorts by (``-`` before one: descending), as the store does."""


class ServerClient:
    """Jobs on the server at ``url`` (``http://host:8420``)."""

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 30.0,
        http: httpx.Client | None = None,
    ) -> None:
        """``http``: the client to send with (a test's ``fastapi.testclient.TestClient``);
        it gets the key's header, and closing this closes it."""
        if not url.startswith(("http://", "https://")):
            raise EmeryError(f"--server must be an http:// or https:// URL, not {url!r}")
        self.url = url.rstrip("/")
        key = api_key or os.environ.get(API_KEY_ENV)
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        if http is None:
            http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout_s)
        else:
            http.headers.update(headers)
        self._http = http

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ServerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def create_job(
        self, config: dict[str, Any], *, name: str | None, idempotency_key: str
    ) -> tuple[dict[str, Any], bool]:
        """(the job, whether this request made it): a request with a key the server has
        seen answers the job that key made."""
        response = self._send(
            "POST",
            "/api/jobs",
            json={"config": config, "name": name, "start": True},
            headers={"Idempotency-Key": idempotency_key},
        )
        return response.json(), response.status_code == 201

    def list_jobs(self, query: dict[str, Any]) -> dict[str, Any]:
        """A page of jobs (``GET /api/jobs`` with ``query``'s filters, None ones left out)."""
        params = {key: value for key, value in query.items() if value is not None}
        return dict(self._send("GET", "/api/jobs", params=params).json())

    def job(self, job_id: str) -> dict[str, Any]:
        """The job in full (config, result, budget and LM usage)."""
        return dict(self._send("GET", f"/api/jobs/{job_id}").json())

    def pause(self, job_id: str, wait_s: float = 30.0) -> dict[str, Any]:
        """Ask the job to pause; waits up to ``wait_s`` for its engine to do so."""
        return dict(self._send("POST", f"/api/jobs/{job_id}/pause", params={"wait": wait_s}).json())

    def cancel(self, job_id: str, wait_s: float = 30.0) -> dict[str, Any]:
        """Cancel the job for good; waits up to ``wait_s`` for its engine to stop."""
        path = f"/api/jobs/{job_id}/cancel"
        return dict(self._send("POST", path, params={"wait": wait_s}).json())

    def resume(self, job_id: str) -> dict[str, Any]:
        return dict(self._send("POST", f"/api/jobs/{job_id}/resume").json())

    def result(self, job_id: str) -> dict[str, Any]:
        """The job's result (``result``: final once it succeeded, a prompt job's search so
        far before; null for a kind that reports once it succeeds) and its ``kind``."""
        return dict(self._send("GET", f"/api/jobs/{job_id}/result").json())

    def candidates(self, job_id: str) -> dict[str, Any]:
        """Every candidate in creation order with its scores per split, and the job's best
        and seed candidate ids."""
        return dict(self._send("GET", f"/api/jobs/{job_id}/candidates").json())

    def candidate(self, job_id: str, candidate_id: str) -> dict[str, Any]:
        """One candidate (id or prefix of 4 or more) in full, with its scores per split."""
        return dict(self._send("GET", f"/api/jobs/{job_id}/candidates/{candidate_id}").json())

    def candidate_diff(self, job_id: str, candidate_id: str, against: str = "parent") -> str:
        """The candidate's unified diff against its first parent (or ``"seed"``); empty
        when it has none in the job."""
        path = f"/api/jobs/{job_id}/candidates/{candidate_id}/diff"
        return str(self._send("GET", path, params={"against": against}).json()["diff"])

    def candidate_scores(
        self, job_id: str, *, split: str, sort: str, limit: int, offset: int = 0
    ) -> dict[str, Any]:
        """A page of the job's candidates with their score on ``split`` in ``sort`` order,
        as the store lists them (``CandidateRecord`` documents)."""
        for part in sort.split(","):  # refused here in the store's words, not as a 422
            name = part.strip().lstrip("-+")
            if name not in CANDIDATE_SORTS:
                choose = ", ".join(CANDIDATE_SORTS)
                raise EmeryError(f"cannot sort by {name!r}; choose one of {choose}")
        params = {"split": split, "sort": sort, "limit": limit, "offset": offset}
        return dict(self._send("GET", f"/api/jobs/{job_id}/scores", params=params).json())

    def stored_events(self, job_id: str, since: int = 0) -> list[Event]:
        """The job's events stored after ``since`` (one page of up to 5000)."""
        page = self._send(
            "GET", f"/api/jobs/{job_id}/events", params={"since": since, "limit": 5000}
        )
        return [Event.model_validate(item) for item in page.json()["events"]]

    def events(self, job_id: str, since: int = 0) -> Iterator[Event]:
        """The job's events after ``since``, following it until it stops running (a dropped
        stream is resumed from the last event seen)."""
        drops = 0
        while True:
            try:
                for kind, data in self._stream(job_id, since):
                    if kind == "end":
                        return
                    item = Event.model_validate(data)
                    since = item.seq or since
                    drops = 0
                    yield item
                return  # the server closed a finished stream without "end": nothing left
            except (httpx.TransportError, httpx.RemoteProtocolError) as exc:
                drops += 1
                if drops > RECONNECTS:
                    raise EmeryError(f"lost the event stream of {self.url}: {exc}") from None
                time.sleep(min(5.0, 0.5 * drops))

    def _stream(self, job_id: str, since: int) -> Iterator[tuple[str, Any]]:
        """(event kind, data) of each Server-Sent Event of the job's stream."""
        path = f"/api/jobs/{job_id}/events/stream"
        timeout = httpx.Timeout(30.0, read=None)  # a quiet job sends only keepalives
        with self._http.stream("GET", path, params={"since": since}, timeout=timeout) as reply:
            _check(reply, read=True)
            kind, data = "message", ""
            for line in reply.iter_lines():
                if not line:
                    if data:
                        yield kind, json.loads(data)
                    kind, data = "message", ""
                elif line.startswith("event:"):
                    kind = line.removeprefix("event:").strip()
                elif line.startswith("data:"):
                    data += line.removeprefix("data:").strip()

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise EmeryError(
                f"cannot reach the emery server at {self.url} ({exc}): is `emery server`"
                " running there?"
            ) from None
        _check(response)
        return response


def _check(response: httpx.Response, *, read: bool = False) -> None:
    """An EmeryError with the server's own message for an error answer."""
    if response.is_success:
        return
    if read:
        response.read()
    try:
        detail = response.json().get("detail")
    except ValueError:
        detail = response.text[:200]
    where = f"{response.request.method} {response.request.url.path}"
    if response.status_code == 401:
        raise EmeryError(
            f"the server refused the API key ({where}: {detail}): set ${API_KEY_ENV}, e.g. in .env"
        )
    if response.status_code == 403:
        raise EmeryError(f"the server does not let this key {where} ({detail})")
    raise EmeryError(f"the server answered {response.status_code} to {where}: {detail}")
