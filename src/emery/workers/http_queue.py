"""The rollout queue of a running ``emery server`` over HTTP: what ``emery runner --server``
claims from, renews leases with and writes results and spans to (``server.queue_api``).

It is a ``RolloutQueue``: the runner's code is the same as on a database, and the claims,
leases and results are the server's store's own transactions, so the guarantees are those
of runners on the database (a lease lost by a dead runner is claimed again; a rollout's
first result is kept, a late one is not). The runner needs no database address or
credentials: a runner key (``$EMERY_RUNNER_KEY``, else ``$EMERY_API_KEY``) that the server
lets reach ``/api/queue`` only.

A request that cannot reach the server, or that it answers 502/503/504, is sent again
after 0.5 s, doubling to 8 s, for up to ``patience_s``; then (or on any other error) it
raises an ``EmeryError`` of one line. A retried finish whose first answer was lost is
answered "not kept" (the result was kept the first time); a retried claim whose first
answer was lost leaves a lease nobody renews, which expires and goes back in the queue.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

import httpx

from emery.core.errors import EmeryError
from emery.core.rollouts import Attempt, Rollout
from emery.core.spans import SpanRecord
from emery.store.records import JobRecord, ResourceRecord, WorkerRecord

RUNNER_KEY_ENV = "EMERY_RUNNER_KEY"
API_KEY_ENV = "EMERY_API_KEY"
RETRIED_STATUSES = frozenset({502, 503, 504})


class HttpQueue:
    """The queue of the server at ``url`` (``http://host:8420``), as a ``RolloutQueue``."""

    def __init__(
        self,
        url: str,
        *,
        key: str | None = None,
        client: httpx.Client | None = None,
        timeout_s: float = 30.0,
        patience_s: float = 60.0,
    ) -> None:
        if client is None and not url.startswith(("http://", "https://")):
            raise EmeryError(f"--server must be an http:// or https:// URL, not {url!r}")
        self.url = url.rstrip("/")
        key = key or os.environ.get(RUNNER_KEY_ENV) or os.environ.get(API_KEY_ENV)
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._http = client or httpx.Client(base_url=self.url, timeout=timeout_s)
        self._http.headers.update(headers)
        self.patience_s = patience_s

    def close(self) -> None:
        self._http.close()

    # -- the RolloutQueue protocol ---------------------------------------------------------

    def get_job(self, job_id: str) -> JobRecord:
        return JobRecord.model_validate(self._send("GET", f"/api/queue/jobs/{job_id}"))

    def get_resource(self, name: str, version: int | None = None) -> ResourceRecord:
        params: dict[str, Any] = {"name": name}
        if version is not None:
            params["version"] = version
        return ResourceRecord.model_validate(
            self._send("GET", "/api/queue/resource", params=params)
        )

    def register_worker(self, record: WorkerRecord) -> None:
        self._send("POST", "/api/queue/workers", json=record.model_dump(mode="json"))

    def worker_heartbeat(
        self, worker_id: str, *, status: str | None = None, job_id: str | None = None
    ) -> None:
        body = {"worker_id": worker_id, "status": status, "job_id": job_id}
        self._send("POST", "/api/queue/workers/heartbeat", json=body)

    def claim_rollout(self, worker_id: str, *, job_id: str | None = None) -> Rollout | None:
        answer = self._send(
            "POST", "/api/queue/claim", json={"worker_id": worker_id, "job_id": job_id}
        )
        rollout = answer.get("rollout")
        return None if rollout is None else Rollout.model_validate(rollout)

    def heartbeat_attempt(self, attempt_id: str) -> bool:
        answer = self._send(
            "POST", "/api/queue/attempts/heartbeat", json={"attempt_id": attempt_id}
        )
        return bool(answer["kept"])

    def finish_rollout(
        self,
        rollout_id: str,
        attempt_id: str,
        *,
        status: str,
        attempt_status: str,
        error: str | None,
        output: Any,
        score: float | None,
        result: dict[str, Any],
    ) -> bool:
        body = {
            "rollout_id": rollout_id,
            "attempt_id": attempt_id,
            "status": status,
            "attempt_status": attempt_status,
            "error": error,
            "output": output,
            "score": score,
            "result": result,
        }
        return bool(self._send("POST", "/api/queue/finish", json=body)["kept"])

    def requeue_rollout(
        self, rollout_id: str, attempt_id: str, number: int, *, attempt_status: str, error: str
    ) -> bool:
        body = {
            "rollout_id": rollout_id,
            "attempt_id": attempt_id,
            "number": number,
            "attempt_status": attempt_status,
            "error": error,
        }
        return bool(self._send("POST", "/api/queue/requeue", json=body)["kept"])

    def expire_leases(self, *, job_id: str | None = None) -> int:
        """Nothing to send: the server expires leases before every claim (0 returned)."""
        return 0

    def add_traces(
        self,
        rollouts: Sequence[Rollout],
        attempts: Sequence[Attempt],
        spans: Sequence[SpanRecord],
    ) -> None:
        body = {
            "rollouts": [r.model_dump(mode="json") for r in rollouts],
            "attempts": [a.model_dump(mode="json") for a in attempts],
            "spans": [s.model_dump(mode="json") for s in spans],
        }
        self._send("POST", "/api/queue/traces", json=body)

    # -- one request -----------------------------------------------------------------------

    def _send(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        """The JSON answer to one request, sent again while the server is away (module
        doc); an ``EmeryError`` of one line otherwise."""
        deadline, pause = time.monotonic() + self.patience_s, 0.5
        while True:
            try:
                response = self._http.request(method, path, **kwargs)
            except httpx.HTTPError as exc:
                problem = f"cannot reach {self.url}: {exc}"
            else:
                if response.status_code not in RETRIED_STATUSES:
                    return _answer(response, self.url)
                problem = f"{self.url} answered {response.status_code}"
            if time.monotonic() + pause > deadline:
                raise EmeryError(f"{problem} (for {self.patience_s:.0f} s)")
            time.sleep(pause)
            pause = min(8.0, pause * 2)


def _answer(response: httpx.Response, url: str) -> dict[str, Any]:
    """The body of a 2xx answer; an ``EmeryError`` with the server's message otherwise."""
    if response.is_success:
        body = response.json()
        return body if isinstance(body, dict) else {"value": body}
    try:
        detail = response.json().get("detail") or response.json().get("message")
    except ValueError:
        detail = response.text[:200]
    if response.status_code == 401:
        detail = f"{detail} (set $EMERY_RUNNER_KEY to a runner key of this server)"
    raise EmeryError(f"{url} answered {response.status_code}: {detail}")
