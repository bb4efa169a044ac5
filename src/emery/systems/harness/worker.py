"""The worker process: runs episodes of harness code, one at a time, for the job process.

Protocol: one JSON object per line. The job sends ``{"type": "episode", "code", "setup"}``;
the worker answers kit requests' replies and ends each episode with ``{"type": "done",
"answer"}`` or ``{"type": "stopped", "reason", "message"}``. The protocol uses private
copies of stdin and stdout: the code's prints go to stderr, its stdin is empty. This is
isolation (a crash or a hang costs one worker), not a security sandbox.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import linecache
import os
import sys
import traceback
from typing import IO, Any

from emery.systems.harness.kit import Kit
from emery.systems.harness.observation import BudgetExceeded

FILENAME = "<harness>"
TRACE_CHARS = 1500


class Channel:
    """The worker's end of the protocol."""

    def __init__(self, reader: IO[bytes], writer: IO[bytes]) -> None:
        self.reader, self.writer = reader, writer

    def send(self, message: dict[str, Any]) -> None:
        self.writer.write(json.dumps(message, default=str).encode() + b"\n")
        self.writer.flush()

    def receive(self) -> dict[str, Any] | None:
        line = self.reader.readline()
        return json.loads(line) if line else None

    def request(self, message: dict[str, Any]) -> dict[str, Any]:
        self.send(message)
        reply = self.receive()
        if reply is None:
            raise SystemExit(0)  # the job process is gone
        return reply


def _trace(exc: BaseException) -> str:
    text = "".join(traceback.format_exception(exc))
    return text if len(text) <= TRACE_CHARS else "…" + text[-TRACE_CHARS:]


def _stopped(reason: str, message: str) -> dict[str, Any]:
    return {"type": "stopped", "reason": reason, "message": message}


def run_episode(code: str, setup: dict[str, Any], channel: Channel) -> dict[str, Any]:
    """Load ``code`` as a fresh module and call its ``run(kit)``; every ending is a message."""
    linecache.cache[FILENAME] = (len(code), None, code.splitlines(True), FILENAME)
    namespace: dict[str, Any] = {"__name__": "harness"}
    kit = Kit(channel.request, setup)
    try:
        exec(compile(code, FILENAME, "exec"), namespace)
        run = namespace.get("run")
        if not callable(run):
            return _stopped("invalid", "the module defines no callable run(kit)")
        answer = run(kit)
        if inspect.isawaitable(answer):
            answer = asyncio.run(_awaited(answer))
    except BudgetExceeded as exc:
        return _stopped("budget", str(exc))
    except SystemExit as exc:
        return _stopped("exit", f"the code called sys.exit({exc.code!r})")
    except BaseException as exc:  # the code's own failure ends its episode only
        return _stopped("exception", _trace(exc))
    return {"type": "done", "answer": "" if answer is None else str(answer)}


async def _awaited(value: Any) -> Any:
    return await value


def main() -> None:
    """Serve episodes until the job process closes the channel."""
    reader = os.fdopen(os.dup(0), "rb")
    writer = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    channel = Channel(reader, writer)
    channel.send({"type": "ready"})
    while (message := channel.receive()) is not None:
        if message.get("type") == "episode":
            channel.send(run_episode(str(message["code"]), dict(message["setup"]), channel))


if __name__ == "__main__":
    main()
