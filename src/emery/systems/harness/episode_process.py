"""The episode process: runs episodes of harness code for the job process, one at a time,
each in a child process forked for it.

Protocol with the job process: one JSON object per line on private copies of stdin and
stdout. The job sends ``{"type": "episode", "code", "setup"}``; the process relays the
episode's kit requests and their replies, and ends it with ``{"type": "done", "answer"}``
or ``{"type": "stopped", "reason", "message"}``.

The code runs in the forked child, in a process group of its own, and talks only to this
process over a socket pair: it never holds the job's channel, so nothing it writes (a
forged ``done`` included) reaches the job process. Its first ending message ends the
episode, an unknown message stops it (``protocol``), and then the child's whole process
group is killed, so neither the code nor a process it started outlives its episode.
SIGTERM, or the job process closing the channel, kill the running episode's group too.
The code's prints go to stderr, its stdin is empty. This is isolation (a crash or a hang
costs one episode), not a security sandbox.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import linecache
import os
import selectors
import signal
import socket
import sys
import time
import traceback
from typing import IO, Any, NoReturn

from emery.systems.harness.kit import Kit
from emery.systems.harness.observation import BudgetExceeded

FILENAME = "<harness>"
TRACE_CHARS = 1500
KIT_REQUESTS = frozenset({"complete", "execute"})
ENDINGS = frozenset({"done", "stopped"})
EXIT_POLLS, EXIT_POLL_S = 50, 0.01


class Channel:
    """One end of a JSON-lines channel (the episode's to the process, in the child)."""

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
            raise SystemExit(0)  # the process is gone
        return reply


class Lines:
    """Lines from a file descriptor, read without blocking past what is there."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._buffer = b""

    def pending(self) -> bool:
        return b"\n" in self._buffer

    def fill(self) -> bool:
        """Read what is there; False at end of file."""
        chunk = os.read(self.fd, 1 << 16)
        self._buffer += chunk
        return bool(chunk)

    def pop(self) -> bytes:
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line


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


class EpisodeProcess:
    """The job's end of the protocol, and the episode children it forks."""

    def __init__(self, job_in: int, job_out: IO[bytes]) -> None:
        self.job = Lines(job_in)
        self.job_out = job_out
        self.group: int | None = None  # the running episode's process group

    def send(self, message: dict[str, Any]) -> None:
        self.job_out.write(json.dumps(message, default=str).encode() + b"\n")
        self.job_out.flush()

    def serve(self) -> None:
        """Serve episodes until the job process closes the channel."""
        self.send({"type": "ready"})
        while (message := self._from_job()) is not None:
            if message.get("type") == "episode":
                self.send(self.episode(str(message["code"]), dict(message["setup"])))

    def episode(self, code: str, setup: dict[str, Any]) -> dict[str, Any]:
        """Run one episode in a forked child and relay its kit requests; kill its group."""
        ours, theirs = socket.socketpair()
        pid = os.fork()
        if pid == 0:
            ours.close()
            _child(code, setup, theirs, (self.job.fd, self.job_out.fileno()))
        theirs.close()
        with contextlib.suppress(OSError):  # the child does it too: no race either way
            os.setpgid(pid, pid)
        self.group = pid
        try:
            return self._relay(pid, Lines(ours.fileno()), ours)
        finally:
            self.kill_episode()
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
            ours.close()

    def kill_episode(self) -> None:
        """Kill the running episode's process group (its code and what it started)."""
        if self.group is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.group, signal.SIGKILL)
            self.group = None

    def _relay(self, pid: int, child: Lines, sock: socket.socket) -> dict[str, Any]:
        while True:
            line = self._child_line(child)
            if line is None:
                return _stopped("crash", f"the episode's process ended ({_exit_text(pid)})")
            try:
                message = json.loads(line)
            except ValueError:
                message = None
            kind = message.get("type") if isinstance(message, dict) else None
            if kind in ENDINGS:
                assert isinstance(message, dict)
                return _ending(message)
            if kind not in KIT_REQUESTS:
                shown = kind if kind is not None else line[:80].decode(errors="replace")
                return _stopped("protocol", f"the code sent {shown!r} on the kit's channel")
            assert isinstance(message, dict)
            self.send(message)
            reply = self._from_job()
            if reply is None:
                self._exit()
            with contextlib.suppress(OSError):  # a child gone is seen at its next read
                sock.sendall(json.dumps(reply).encode() + b"\n")

    def _child_line(self, child: Lines) -> bytes | None:
        """The child's next line; the job closing the channel meanwhile ends the process."""
        with selectors.DefaultSelector() as selector:
            selector.register(child.fd, selectors.EVENT_READ, child)
            selector.register(self.job.fd, selectors.EVENT_READ, self.job)
            while not child.pending():
                for key, _ in selector.select():
                    if key.data is child and not child.fill():
                        return None
                    if key.data is self.job and not self.job.fill():
                        self._exit()
        return child.pop()

    def _from_job(self) -> dict[str, Any] | None:
        while not self.job.pending():
            if not self.job.fill():
                return None
        value: dict[str, Any] = json.loads(self.job.pop())
        return value

    def _exit(self, *_: Any) -> NoReturn:
        self.kill_episode()
        os._exit(0)


def _ending(message: dict[str, Any]) -> dict[str, Any]:
    """The episode's ending as the process sends it (only the protocol's fields, as text)."""
    if message["type"] == "done":
        return {"type": "done", "answer": str(message.get("answer", ""))}
    return _stopped(str(message.get("reason", "exception")), str(message.get("message", "")))


def _exit_text(pid: int) -> str:
    """How the child ended, once it has (it may close its channel and go on: not waited)."""
    for _ in range(EXIT_POLLS):
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return "no exit status"
        if done:
            if os.WIFSIGNALED(status):
                return f"killed by signal {os.WTERMSIG(status)}"
            return f"exit status {os.waitstatus_to_exitcode(status)}"
        time.sleep(EXIT_POLL_S)
    return "it closed its channel"


def _child(
    code: str, setup: dict[str, Any], sock: socket.socket, job_fds: tuple[int, ...]
) -> NoReturn:
    """The forked episode: its own process group, no access to the job's channel."""
    status = 0
    try:
        os.setpgid(0, 0)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        for fd in job_fds:
            os.close(fd)
        channel = Channel(sock.makefile("rb"), sock.makefile("wb"))
        channel.send(run_episode(code, setup, channel))
    except BaseException:
        status = 1
    finally:
        os._exit(status)


def private_stdio() -> tuple[int, IO[bytes]]:
    """The protocol's private copies of stdin (a descriptor) and stdout; the code's stdin
    is then empty and its stdout is stderr."""
    reader = os.dup(0)
    writer = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return reader, writer


def main() -> None:
    """Take the protocol's private copies of stdin and stdout and serve episodes."""
    process = EpisodeProcess(*private_stdio())
    signal.signal(signal.SIGTERM, process._exit)
    process.serve()
    process.kill_episode()


if __name__ == "__main__":
    main()
