"""Running a reply's Python code against test code: the reader of the code in a reply and
the test process that runs it under a time and a memory limit (see ``code_tests`` for the
verifier and what the limits do and do not guard against).

Standard library only and no emery imports, so a peer script in a venv without emery loads
this file by its path and scores replies exactly as a job does
(``benchmarks/quality/peers/scoring.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import secrets
import signal
import sys
import tempfile
from typing import Any

FENCE = re.compile(r"```[ \t]*([\w+.-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
PYTHON_TAGS = frozenset({"", "python", "py", "python3"})
RESULT = "@@emery-code-tests"
"""The prefix of the test process's one result line on stdout (the code may print too), followed
by a nonce of the run the code is not given (not on its command line, not in its globals),
so a reply that prints a result line of its own is not read as passing."""


def read_code(text: str, defines: str | None = None) -> str:
    """The Python code of a reply: a fenced block (```python or bare ```), else the whole
    reply. Of several blocks, the first that defines ``defines`` (a function name), else
    the first that defines any function, else the first."""
    blocks: list[str] = [
        _trim(body) for tag, body in FENCE.findall(text) if tag.lower() in PYTHON_TAGS
    ]
    if not blocks:
        return _trim(text)
    if defines is not None:
        own = re.compile(rf"^\s*(?:async\s+)?def\s+{re.escape(defines)}\s*\(", re.MULTILINE)
        for body in blocks:
            if own.search(body):
                return body
    for body in blocks:
        if re.search(r"^\s*(?:async\s+)?def\s+\w+", body, re.MULTILINE):
            return body
    return blocks[0]


def _trim(code: str) -> str:
    """``code`` without blank lines around it, its first line's indentation kept (a bare
    function body is indented)."""
    return re.sub(r"\A(?:[ \t]*\n)+", "", code).rstrip()


def program(code: str, entry_point: str | None, prompt: str | None) -> str:
    """The code to test: the reply's, or, when it does not define ``entry_point`` and there
    is a ``prompt`` (a signature and docstring), the prompt followed by the reply (a body
    written to complete it)."""
    if not entry_point or not prompt:
        return code
    if re.search(rf"^\s*(?:async\s+)?def\s+{re.escape(entry_point)}\s*\(", code, re.MULTILINE):
        return code
    return prompt.rstrip("\n") + "\n" + code


# The test process: caps its own resources (argv: memory in MB, CPU seconds), reads {"code",
# "tests", "prefix"} as JSON on stdin, runs the code, then the tests, in one namespace, and
# prints one line: the prefix and {"passed": bool, "feedback": str}.
WORKER = r"""
import ast, contextlib, io, json, linecache, resource, sys, traceback

LIMIT = 300
MEMORY, CPU_S = int(sys.argv[1]) * 1024 * 1024, int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))
resource.setrlimit(resource.RLIMIT_CPU, (CPU_S, CPU_S + 1))
resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

def clip(text):
    flat = " ".join(str(text).split())
    return flat if len(flat) <= LIMIT else flat[: LIMIT - 1] + "\u2026"

def failing_line(tb, filename):
    line = None
    for frame, lineno in traceback.walk_tb(tb):
        if frame.f_code.co_filename == filename:
            line = (frame, lineno)
    return line

def assert_feedback(source, frame, lineno):
    text = source.splitlines()[lineno - 1].strip()
    try:
        node = ast.parse(text).body[0]
        test = node.test if isinstance(node, ast.Assert) else None
    except SyntaxError:
        test = None
    shown = clip(text if test is None else "assert " + ast.unparse(test))  # not its message
    if test is not None and isinstance(test, ast.Compare) and len(test.ops) == 1:
        left = ast.unparse(test.left)
        try:
            got = eval(left, frame.f_globals, frame.f_locals)
        except BaseException as exc:
            return f"{shown} failed: {left} raised {type(exc).__name__}: {clip(exc)}"
        return f"{shown} failed: {left} was {clip(repr(got))}"
    return f"{shown} failed"

def main():
    job = json.loads(sys.stdin.read())
    prefix = job.pop("prefix")
    namespace = {"__name__": "__main__"}
    out = io.StringIO()
    result = {"passed": False, "feedback": ""}
    runs = (("code", job["code"], "<reply>"), ("tests", job["tests"], "<tests>"))
    for stage, source, filename in runs:
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        try:
            compiled = compile(source, filename, "exec")
        except SyntaxError as exc:
            where = "the reply" if stage == "code" else "the tests"
            result["feedback"] = f"{where} is not valid Python: {exc.msg} (line {exc.lineno})"
            break
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
                exec(compiled, namespace)
        except AssertionError as exc:
            found = failing_line(exc.__traceback__, "<tests>")
            if stage == "tests" and found is not None:
                result["feedback"] = assert_feedback(source, *found)
            else:  # an assert of the reply's own (its examples), or one the tests called
                said = clip(exc)
                where = "the reply's code" if stage == "code" else "the code"
                said = f": {said}" if said else ""
                result["feedback"] = f"{where} raised AssertionError{said}"
            break
        except BaseException as exc:
            if stage == "code":
                what = "the reply's code raised"
            else:
                found = failing_line(exc.__traceback__, "<reply>")
                what = "the code raised" + (f" at line {found[1]}" if found else "")
            said = clip(exc)
            result["feedback"] = f"{what} {type(exc).__name__}" + (f": {said}" if said else "")
            break
    else:
        result = {"passed": True, "feedback": "every test passed"}
    sys.__stdout__.write("\n" + prefix + json.dumps(result) + "\n")
    sys.__stdout__.flush()
    sys.__stdout__.close()
    import os
    os._exit(0)

main()
"""


async def run_tests(
    code: str, tests: str, *, timeout_s: float = 10.0, memory_mb: int = 512
) -> tuple[bool, str]:
    """Run ``code`` then ``tests`` in a test process: (passed, feedback)."""
    with tempfile.TemporaryDirectory(prefix="emery-code-") as folder:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-I", "-c", WORKER, str(memory_mb), str(int(timeout_s) + 1),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            cwd=folder,
            env={"PATH": os.environ.get("PATH", ""), "PYTHONHASHSEED": "0"},
            start_new_session=True,
        )  # fmt: skip
        prefix = f"{RESULT}-{secrets.token_hex(8)}@@"
        job = json.dumps({"code": code, "tests": tests, "prefix": prefix}).encode()
        try:
            stdout, _ = await asyncio.wait_for(process.communicate(job), timeout_s)
        except TimeoutError:
            _kill(process)
            await process.wait()
            return False, f"the code did not finish within {timeout_s:g} s"
        except asyncio.CancelledError:
            _kill(process)
            raise
    for line in reversed(stdout.decode(errors="replace").splitlines()):
        if line.startswith(prefix):
            result: dict[str, Any] = json.loads(line[len(prefix) :])
            return bool(result["passed"]), str(result["feedback"])
    if process.returncode is not None and process.returncode < 0:
        name = signal.Signals(-process.returncode).name
        return False, f"the code was stopped by {name} (over the time or memory limit?)"
    return False, f"the code ended the process (exit status {process.returncode}) before the tests"


def _kill(process: asyncio.subprocess.Process) -> None:
    """Kill the test process's whole session (anything it started too)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


async def score_code(
    text: str,
    tests: str,
    *,
    entry_point: str | None = None,
    prompt: str | None = None,
    timeout_s: float = 10.0,
    memory_mb: int = 512,
) -> tuple[float, str]:
    """(score, feedback) of the code in reply ``text`` against ``tests``: 1 when every
    assert holds, else 0 with the first failing assert or the exception."""
    code = read_code(text, entry_point)
    if not code:
        return 0.0, "The reply has no code."
    passed, feedback = await run_tests(
        program(code, entry_point, prompt), tests, timeout_s=timeout_s, memory_mb=memory_mb
    )
    if passed:
        return 1.0, "Correct: every test passed."
    flat = " ".join(feedback.split())
    return 0.0, f"Wrong: {flat if len(flat) <= 400 else flat[:399] + '…'}."
