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

Span batches (``add_traces``, what the runner's write-behind recorder hands over) are held
and ride on this queue's next claim, heartbeat, finish or requeue, stored by the server
before that request's own call (a batch it refuses is dropped with a warning and the call
sent again without it): a finished attempt's spans are in the store when its
result is, and a rollout costs one request fewer. A batch is sent alone once
``OUTBOX_ITEMS`` rows wait, and on ``flush`` or ``close``; the runner's last request (its
worker row's "stopped") carries what is left.

A lease renewed (claimed or heartbeat) by this queue less than ``1 / RENEW_FRACTION`` of
the lease ago is not renewed again: ``heartbeat_attempt`` answers true without a request.
The runner beats at least four times per lease, so a lease is never left unrenewed for
more than 3/8 of it; a rollout that ends soon after its claim costs no heartbeat.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import httpx

from emery.core.errors import EmeryError
from emery.core.rollouts import Attempt, Rollout
from emery.core.spans import SpanRecord
from emery.store.queue import DEFAULT_LEASE_S, LEASE_KEY
from emery.store.records import JobRecord, ResourceRecord, RolloutEnd, WorkerRecord

RUNNER_KEY_ENV = "EMERY_RUNNER_KEY"
API_KEY_ENV = "EMERY_API_KEY"
RETRIED_STATUSES = frozenset({502, 503, 504})
RENEW_FRACTION = 8
"""A lease renewed less than this part of it ago is not renewed again (module doc)."""
OUTBOX_ITEMS = 2048
RESOURCES_KEPT = 256
"""Resource versions a queue keeps (the oldest asked is dropped first)."""
"""Rows of span batches held for the next request before they are sent alone."""

log = logging.getLogger(__name__)


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
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if client is None and not url.startswith(("http://", "https://")):
            raise EmeryError(f"--server must be an http:// or https:// URL, not {url!r}")
        self.url = url.rstrip("/")
        key = key or os.environ.get(RUNNER_KEY_ENV) or os.environ.get(API_KEY_ENV)
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._http = client or httpx.Client(base_url=self.url, timeout=timeout_s)
        self._http.headers.update(headers)
        self.patience_s = patience_s
        self.clock = clock  # when leases were renewed
        self._outbox: tuple[list[Rollout], list[Attempt], list[SpanRecord]] = ([], [], [])
        self._outbox_lock = threading.Lock()
        self._renewed: dict[str, tuple[float, float]] = {}  # attempt -> (renewed at, lease)
        self._resources: dict[tuple[str, int], ResourceRecord] = {}

    def close(self) -> None:
        """Send the span batches held, then close the connections."""
        try:
            self.flush()
        finally:
            self._http.close()

    def flush(self) -> None:
        """Send the span batches held, alone."""
        traces = self._take_outbox()
        if traces is not None:
            self._send("POST", "/api/queue/traces", json=traces)

    # -- the RolloutQueue protocol ---------------------------------------------------------

    def get_job(self, job_id: str) -> JobRecord:
        return JobRecord.model_validate(self._send("GET", f"/api/queue/jobs/{job_id}"))

    def get_resource(self, name: str, version: int | None = None) -> ResourceRecord:
        """A stored resource; a version asked for by number is asked once (versions never
        change), so a runner fetches each candidate once, not once a rollout."""
        if version is not None and (name, version) in self._resources:
            return self._resources[(name, version)]
        params: dict[str, Any] = {"name": name}
        if version is not None:
            params["version"] = version
        record = ResourceRecord.model_validate(
            self._send("GET", "/api/queue/resource", params=params)
        )
        if version is not None:
            if len(self._resources) >= RESOURCES_KEPT:
                self._resources.pop(next(iter(self._resources)))
            self._resources[(name, version)] = record
        return record

    def register_worker(self, record: WorkerRecord) -> None:
        self._send("POST", "/api/queue/workers", json=record.model_dump(mode="json"))

    def worker_heartbeat(
        self, worker_id: str, *, status: str | None = None, job_id: str | None = None
    ) -> None:
        body = {"worker_id": worker_id, "status": status, "job_id": job_id}
        self._carry("/api/queue/workers/heartbeat", body)

    def claim_rollout(self, worker_id: str, *, job_id: str | None = None) -> Rollout | None:
        sent = self.clock()  # the server's lease starts after this
        answer = self._carry("/api/queue/claim", {"worker_id": worker_id, "job_id": job_id})
        return self._claimed(answer, sent)

    def _claimed(self, answer: dict[str, Any], sent: float) -> Rollout | None:
        """The rollout an answer claimed (None: none), its lease noted as renewed."""
        if answer.get("rollout") is None:
            return None
        rollout = Rollout.model_validate(answer["rollout"])
        lease = float(rollout.metadata.get(LEASE_KEY) or DEFAULT_LEASE_S)
        self._renewed[f"{rollout.id}:{rollout.attempt_count}"] = (sent, lease)
        return rollout

    def heartbeat_attempt(self, attempt_id: str) -> bool:
        """Renew the lease, unless this queue renewed it very recently (module doc)."""
        sent = self.clock()
        renewed = self._renewed.get(attempt_id)
        if renewed is not None and sent - renewed[0] < renewed[1] / RENEW_FRACTION:
            return True
        answer = self._carry("/api/queue/attempts/heartbeat", {"attempt_id": attempt_id})
        if not answer["kept"]:
            self._renewed.pop(attempt_id, None)
        elif renewed is not None:
            self._renewed[attempt_id] = (sent, renewed[1])
        return bool(answer["kept"])

    def finish_rollout(self, rollout_id: str, attempt_id: str, end: RolloutEnd) -> bool:
        """End the attempt as ``end`` says (its fields flat in the body)."""
        body = {"rollout_id": rollout_id, "attempt_id": attempt_id, **end.fields()}
        return bool(self._finish(body)["kept"])

    def finish_and_claim(
        self,
        rollout_id: str,
        attempt_id: str,
        end: RolloutEnd,
        *,
        worker_id: str,
        job_id: str | None = None,
    ) -> tuple[bool, Rollout | None]:
        """The finish and the next claim in one request (and one transaction)."""
        sent = self.clock()
        claim = {"worker_id": worker_id, "job_id": job_id}
        body = {"rollout_id": rollout_id, "attempt_id": attempt_id, **end.fields(), "claim": claim}
        answer = self._finish(body)
        return bool(answer["kept"]), self._claimed(answer, sent)

    def _finish(self, body: dict[str, Any]) -> dict[str, Any]:
        self._renewed.pop(str(body["attempt_id"]), None)
        return self._carry("/api/queue/finish", body)

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
        self._renewed.pop(attempt_id, None)
        return bool(self._carry("/api/queue/requeue", body)["kept"])

    def expire_leases(self, *, job_id: str | None = None) -> int:
        """Nothing to send: the server expires leases before every claim (0 returned)."""
        return 0

    def add_traces(
        self,
        rollouts: Sequence[Rollout],
        attempts: Sequence[Attempt],
        spans: Sequence[SpanRecord],
    ) -> None:
        """Hold the batch for the next request to carry (module doc)."""
        with self._outbox_lock:
            held = self._outbox
            held[0].extend(rollouts)
            held[1].extend(attempts)
            held[2].extend(spans)
            full = sum(len(part) for part in held) >= OUTBOX_ITEMS
        if full:
            self.flush()

    def _take_outbox(self) -> dict[str, Any] | None:
        """The span batches held, as a request body, emptied (None: nothing held)."""
        with self._outbox_lock:
            rollouts, attempts, spans = self._outbox
            if not (rollouts or attempts or spans):
                return None
            self._outbox = ([], [], [])
        return {
            "rollouts": [r.model_dump(mode="json") for r in rollouts],
            "attempts": [a.model_dump(mode="json") for a in attempts],
            "spans": [s.model_dump(mode="json") for s in spans],
        }

    def _carry(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """``POST path`` with ``body`` and the span batches held (module doc); sent again
        without them when the server refuses them (they are dropped: spans never fail a
        runner's call)."""
        traces = self._take_outbox()
        if traces is None:
            return self._send("POST", path, json=body)
        try:
            return self._send("POST", path, json={**body, "traces": traces})
        except Refused as exc:
            if exc.status != 400:
                raise
            log.warning("%d spans were not stored: %s", len(traces["spans"]), exc)
        return self._send("POST", path, json=body)

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


class Refused(EmeryError):
    """The server answered a request with an error status (``status``)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


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
    raise Refused(f"{url} answered {response.status_code}: {detail}", response.status_code)
