"""A bounded fuzz of emery's two HTTP servers, ``emery proxy`` (the LM proxy, over a
scripted model) and the task app (hosting a small agent), each served by uvicorn on
127.0.0.1 at a free port:

- schemathesis generates requests from each server's published OpenAPI (valid and
  invalid ones, up to ``--examples`` per operation). The proxy reads its chat body by
  hand, so its OpenAPI has no body schema; the fuzz adds ``ChatRequest``'s to the chat
  routes so the bodies are fuzzed too;
- hand-made malformed bodies (``malformed.py``): deep nesting, lone surrogates, a body
  over the size limit, wrong types, invalid JSON and UTF-8.

Target: no answer 5xx. Usage: python benchmarks/reliability/fuzz.py [--examples 50]
Exits 1 when any request got a 5xx."""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx
from malformed import malformed_requests
from scripted_lm import task_reply

from emery.lm.fake import FakeLM
from emery.proxy.app import create_app
from emery.proxy.chat_request import ChatRequest
from emery.proxy.serving import BackgroundServer
from emery.taskapp import create_task_app


def agent(question: str = "", system_prompt: str = "Answer briefly.") -> str:
    """The task app's agent: no model call, one component."""
    return f"{system_prompt} {question}"[:200]


def servers() -> dict[str, Any]:
    """The apps under test, by name."""
    return {
        "serve": create_app(default_lm=FakeLM(task_reply, model="scripted-task")),
        "taskapp": create_task_app(agent, name="fuzz"),
    }


@dataclass
class Tally:
    """Requests sent to one server and the 5xx answers among them."""

    name: str
    statuses: Counter[int] = field(default_factory=Counter)
    operations: int = 0
    server_errors: list[str] = field(default_factory=list)
    resets: list[str] = field(default_factory=list)

    def record(self, label: str, status: int) -> None:
        self.statuses[status] += 1
        if status >= 500:
            self.server_errors.append(f"{label} -> {status}")

    def line(self, what: str) -> str:
        codes = ", ".join(f"{code}: {n}" for code, n in sorted(self.statuses.items()))
        shown = f" over {self.operations} operations" if self.operations else ""
        return (
            f"{self.name:<8} {what:<11} {sum(self.statuses.values()):>5} requests{shown},"
            f" {len(self.server_errors)} 5xx, {len(self.resets)} without an answer ({codes})"
        )


def with_chat_body(openapi: dict[str, Any]) -> dict[str, Any]:
    """``openapi`` with ``ChatRequest`` as the body of every chat-completions route."""
    body = ChatRequest.model_json_schema(ref_template="#/components/schemas/{model}")
    schemas = openapi.setdefault("components", {}).setdefault("schemas", {})
    schemas.update(body.pop("$defs", {}))
    schemas["ChatRequest"] = body
    reference = {"$ref": "#/components/schemas/ChatRequest"}
    for path, item in openapi["paths"].items():
        if path.endswith("/chat/completions") and "post" in item:
            item["post"]["requestBody"] = {
                "required": True,
                "content": {"application/json": {"schema": reference}},
            }
    return openapi


def schema_fuzz(name: str, url: str, examples: int) -> Tally:
    """schemathesis on the server at ``url``: ``examples`` cases per operation and mode."""
    import schemathesis
    from schemathesis import GenerationMode

    tally = Tally(name)
    openapi = with_chat_body(httpx.get(f"{url}/openapi.json").json())
    schema = schemathesis.openapi.from_dict(openapi)
    for result in schema.get_all_operations():
        operation = result.ok()
        tally.operations += 1
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            _fuzz_operation(tally, url, operation.as_strategy(generation_mode=mode), examples)
    return tally


def _fuzz_operation(tally: Tally, url: str, strategy: Any, examples: int) -> None:
    """Send ``examples`` cases drawn from ``strategy``; record each status."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
    from hypothesis.errors import Unsatisfiable

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(st.data())
    def run(data: st.DataObject) -> None:
        case = data.draw(strategy)
        response = case.call(base_url=url, timeout=30)
        tally.record(f"{case.method} {case.formatted_path}", response.status_code)

    with contextlib.suppress(Unsatisfiable):  # nothing to make invalid (no parameters)
        run()


def malformed_fuzz(name: str, url: str) -> Tally:
    """Every hand-made malformed request for server ``name``."""
    tally = Tally(name)
    fresh = httpx.Limits(max_keepalive_connections=0)  # one request's crash spoils no other
    with httpx.Client(base_url=url, timeout=60, limits=fresh) as client:
        for label, method, path, headers, content in malformed_requests(name):
            try:
                status = client.request(method, path, headers=headers, content=content).status_code
            except httpx.TransportError as exc:
                status = 0
                tally.resets.append(f"{label}: {method} {path}: {exc}")
            tally.record(f"{label}: {method} {path}", status)
    return tally


def fuzz(examples: int, log: Callable[[str], None] = print) -> list[Tally]:
    """Both fuzzes against both servers; the tallies, schemathesis first."""
    tallies = []
    for name, app in servers().items():
        with BackgroundServer(app) as server:
            for what, tally in (
                ("schemathesis", schema_fuzz(name, server.url, examples)),
                ("malformed", malformed_fuzz(name, server.url)),
            ):
                log(tally.line(what))
                for error in [*tally.server_errors, *tally.resets][:10]:
                    log(f"    {error}")
                tallies.append(tally)
    return tallies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=50, help="cases per operation and mode")
    args = parser.parse_args()
    started = time.monotonic()
    tallies = fuzz(args.examples)
    print(f"{time.monotonic() - started:.0f} s")
    sys.exit(1 if any(tally.server_errors for tally in tallies) else 0)


if __name__ == "__main__":
    main()
