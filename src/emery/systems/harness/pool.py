"""Code processes, the child processes that run user code: a harness's episode processes
and graph code nodes' node processes. Started on demand, reused between episodes, killed
after a timeout, a crash or a cancelled episode.

Each process is ``python -m MODULE`` (``emery.systems.harness.episode_process`` unless the
pool names another) speaking JSON lines over its stdin and stdout. Reads are non-blocking
through the running event loop, so a pool serves any loop; a process exits by itself when
the job process goes away (EOF). Each process leads a process group of its own, killed
whole with it.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

START_TIMEOUT_S = 60.0
KEEP_IDLE = 8
TERM_GRACE_S = 1.0
EPISODE_PROCESS = "emery.systems.harness.episode_process"


class ProcessGone(Exception):
    """The code process ended or closed its channel."""


class CodeProcess:
    """One code process and its end of the JSON-lines channel."""

    def __init__(self, module: str = EPISODE_PROCESS) -> None:
        env = dict(os.environ)
        package_root = str(Path(__file__).resolve().parents[3])
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", module],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            start_new_session=True,  # a process group of its own: killed whole
        )
        assert self.proc.stdout is not None
        assert self.proc.stdin is not None
        self._fd = self.proc.stdout.fileno()
        os.set_blocking(self._fd, False)
        self._buffer = b""
        self.started = False

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def send(self, message: dict[str, Any]) -> None:
        """Write one message; a dead process raises ``ProcessGone``."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(message, default=str).encode() + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError) as exc:
            raise ProcessGone(f"the code process ended ({self.exit_text()})") from exc

    async def receive(self, timeout: float) -> dict[str, Any]:
        """The next message; ``TimeoutError`` after ``timeout`` s, ``ProcessGone`` at EOF."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            await self._readable(left)
            try:
                chunk = os.read(self._fd, 1 << 16)
            except BlockingIOError:
                continue
            if not chunk:
                raise ProcessGone(f"the code process ended ({self.exit_text()})")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            value: dict[str, Any] = json.loads(line)
        except ValueError:
            raise ProcessGone(f"the process sent a line that is not JSON: {line[:80]!r}") from None
        return value

    async def _readable(self, timeout: float) -> None:
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()

        def wake() -> None:
            if not ready.done():
                ready.set_result(None)

        loop.add_reader(self._fd, wake)
        try:
            await asyncio.wait_for(ready, timeout)
        finally:
            loop.remove_reader(self._fd)

    def exit_text(self) -> str:
        try:
            code = self.proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            return "no exit status"
        return f"exit status {code}"

    def kill(self) -> None:
        """SIGTERM (a process may kill what it runs, then exit), then SIGKILL to its whole
        process group: nothing it started outlives it unless it left the group."""
        if self.alive:
            self.proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=TERM_GRACE_S)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5.0)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


class CodeProcessPool:
    """Idle processes kept for the next episode (at most ``keep``); each runs ``module``."""

    def __init__(self, keep: int = KEEP_IDLE, module: str = EPISODE_PROCESS) -> None:
        self.keep = keep
        self.module = module
        self._idle: list[CodeProcess] = []
        self._lock = threading.Lock()
        self.started = 0

    async def acquire(self) -> CodeProcess:
        """An idle live process, or a new one once it says it is ready."""
        with self._lock:
            while self._idle:
                process = self._idle.pop()
                if process.alive:
                    return process
                process.kill()
        process = CodeProcess(self.module)
        self.started += 1
        try:
            hello = await process.receive(START_TIMEOUT_S)
        except BaseException:
            process.kill()
            raise
        if hello.get("type") != "ready":
            process.kill()
            raise ProcessGone(f"the code process did not start: {hello}")
        return process

    def release(self, process: CodeProcess, healthy: bool) -> None:
        """Keep a healthy process for later; kill any other."""
        with self._lock:
            if healthy and process.alive and len(self._idle) < self.keep:
                self._idle.append(process)
                return
        process.kill()

    def close(self) -> None:
        """Kill every idle process."""
        with self._lock:
            idle, self._idle = self._idle, []
        for process in idle:
            process.kill()


POOL = CodeProcessPool()
atexit.register(POOL.close)
