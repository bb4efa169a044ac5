"""The node process of graph code nodes: calls a node's function for the job process.

Protocol (JSON lines over private copies of stdin and stdout, as the harness's episode process):
the job sends ``{"type": "call", "node", "source", "function", "arguments"}``; the process
answers ``{"type": "value", "value"}`` or ``{"type": "failed", "message"}`` (one line
saying why: the module failed to load, the function raised or called ``sys.exit``, or
its value is not JSON). The code's prints go to stderr, its stdin is empty. A node's
module is loaded once per process and kept (at most ``KEEP_MODULES``); a crash or a hang
costs one process, which the job kills. Isolation, not a security sandbox.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
from collections.abc import Callable
from typing import Any

from emery.systems.harness.episode_process import Channel, private_stdio

KEEP_MODULES = 64
JSON_TYPES = "str, int, float, bool, None, a list or a dict of them"

_modules: dict[tuple[str, str], dict[str, Any]] = {}


class CodeFailed(Exception):
    """The node's code failed; the message says how, in one line."""


def _failure(exc: BaseException) -> str:
    if isinstance(exc, SystemExit):
        return f"the code called sys.exit({exc.code!r})"
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def load(node: str, source: str, function: str) -> Callable[..., Any]:
    """``function`` of ``source`` loaded as a fresh module (once per process)."""
    key = (node, source)
    namespace = _modules.get(key)
    if namespace is None:
        namespace = {"__name__": f"emery_graph_{node}"}
        try:
            exec(compile(source, f"<code node {node}>", "exec"), namespace)
        except BaseException as exc:  # the module's own failure ends this call only
            raise CodeFailed(f"the source failed to load: {_failure(exc)}") from None
        if len(_modules) >= KEEP_MODULES:
            _modules.pop(next(iter(_modules)))
        _modules[key] = namespace
    found = namespace.get(function)
    if not callable(found):
        raise CodeFailed(f"{function!r} is not a function")
    loaded: Callable[..., Any] = found
    return loaded


def call(message: dict[str, Any]) -> dict[str, Any]:
    """The reply to one call: the function's value, or why there is none."""
    try:
        function = load(str(message["node"]), str(message["source"]), str(message["function"]))
        value = function(**dict(message["arguments"]))
        if inspect.isawaitable(value):
            value = asyncio.run(_awaited(value))
    except CodeFailed as exc:
        return {"type": "failed", "message": str(exc)}
    except BaseException as exc:  # the code's own failure ends this call only
        return {"type": "failed", "message": _failure(exc)}
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        return {
            "type": "failed",
            "message": f"it returned a {type(value).__name__} that is not JSON ({exc});"
            f" return {JSON_TYPES}",
        }
    return {"type": "value", "value": value}


async def _awaited(value: Any) -> Any:
    return await value


def private_channel() -> Channel:
    """The protocol's channel on private copies of stdin and stdout; the code's stdin is
    then empty and its stdout is stderr."""
    reader, writer = private_stdio()
    return Channel(os.fdopen(reader, "rb"), writer)


def main() -> None:
    """Serve calls until the job process closes the channel."""
    channel = private_channel()
    channel.send({"type": "ready"})
    while (message := channel.receive()) is not None:
        if message.get("type") == "call":
            channel.send(call(message))


if __name__ == "__main__":
    main()
