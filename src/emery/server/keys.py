"""The keys of ``emery server`` and what each may do.

The API key (``$EMERY_API_KEY``) is the admin's: every route. Each other key has a scope
(``proxy.guards.KeyScope``: grants of methods × path patterns), and a request its scope does
not grant is answered 403 with the line that says what the key may do:

- read (``$EMERY_READ_KEY``): ``GET`` and ``HEAD`` on ``/api/**`` (event streams included),
  ``/metrics``, the dashboard and the API's docs; nothing that changes state.
- submit (``$EMERY_SUBMIT_KEY``): what the read key may, and create jobs (``POST
  /api/jobs``) and pause, resume and cancel them; not the queue, approval decisions,
  feedback, ingest or the LM proxy.
- runner (``$EMERY_RUNNER_KEY``): ``/api/queue/**`` only, what ``emery runner --server``
  needs; not the jobs, data or traces.
- application (``$EMERY_APP_KEY``): what an application calls: the published systems
  (``POST /systems/*/run``), prompts (``GET /api/prompts/**``), the LM proxy
  (``/v1/chat/completions``, ``/prompts/*/v1/chat/completions``), feedback (``POST
  /api/feedback``) and trace ingest (``POST /v1/traces``); not the jobs, data or queue.
"""

from __future__ import annotations

from emery.core.errors import ConfigError
from emery.proxy.guards import Grant, KeyScope
from emery.server.queue_api import QUEUE_PREFIX

READ_KEY_ENV = "EMERY_READ_KEY"
SUBMIT_KEY_ENV = "EMERY_SUBMIT_KEY"
APP_KEY_ENV = "EMERY_APP_KEY"

READING = Grant(
    frozenset({"GET", "HEAD"}),
    ("/api/**", "/metrics", "/", "/static/**", "/docs/**", "/redoc", "/openapi.json"),
)
SUBMITTING = Grant(
    frozenset({"POST"}),
    ("/api/jobs", "/api/jobs/*/pause", "/api/jobs/*/resume", "/api/jobs/*/cancel"),
)
_READS = "GET and HEAD on /api/* (event streams included), /metrics and the dashboard"

READ = KeyScope("read-only", (READING,), f"it may {_READS}, and change nothing")
SUBMIT = KeyScope(
    "submit",
    (READING, SUBMITTING),
    f"it may {_READS}, create jobs (POST /api/jobs) and pause, resume or cancel them;"
    " nothing else (not /api/queue, approval decisions or publishing)",
)
RUNNER = KeyScope(
    "runner",
    (Grant(frozenset(), (f"{QUEUE_PREFIX}/**",)),),
    f"it may reach {QUEUE_PREFIX} only (emery runner --server)",
)

APP = KeyScope(
    "application",
    (
        Grant(
            frozenset({"POST"}),
            (
                "/systems/*/run",
                "/v1/chat/completions",
                "/prompts/*/v1/chat/completions",
                "/api/feedback",
                "/v1/traces",
            ),
        ),
        Grant(frozenset({"GET", "HEAD"}), ("/api/prompts", "/api/prompts/**")),
    ),
    "it may run published systems (POST /systems/NAME/run), read published prompts, call"
    " the LM proxy, send feedback and traces; nothing else (not the jobs or the queue)",
)


def scoped_keys(
    api_key: str | None,
    *,
    runner_key: str | None = None,
    read_key: str | None = None,
    submit_key: str | None = None,
    app_key: str | None = None,
) -> dict[str, KeyScope]:
    """Each key given beside the API key with its scope; a ConfigError for a key given
    without an API key (every route would be open) or two keys that are the same."""
    given = {RUNNER: runner_key, READ: read_key, SUBMIT: submit_key, APP: app_key}
    named = {scope: key for scope, key in given.items() if key}
    if named and api_key is None:
        first = next(iter(named)).name
        raise ConfigError(f"a {first} key needs an API key: without one every route is open")
    seen: dict[str, str] = {api_key: "API"} if api_key else {}
    for scope, key in named.items():
        if key in seen:
            raise ConfigError(
                f"the {scope.name} key is the {seen[key]} key: give each key its own value"
            )
        seen[key] = scope.name
    return {key: scope for scope, key in named.items()}
