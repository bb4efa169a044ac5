"""Code that must pass its tests: the reply's Python code, run with the example's test code
in a worker process under a time and a memory limit. Pass (1) when every assert holds;
the feedback of a fail names the first failing assert and what its left side was, or the
exception the code raised, never the rest of the tests.

The worker is a fresh ``python -I`` process in an empty temporary folder, in a session of
its own (killed whole at the time limit), that caps its own address space, CPU time and
file size (``resource.setrlimit``) before it runs anything. That bounds a runaway reply;
it is not a sandbox: the code runs as the job's user, can read what that user can and
reach the network. Run code tasks on a machine (or a container) you would run the model's
code on.
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

from emery.core.models import Example
from emery.verifiers.base import Verdict, as_text, clip

FENCE = re.compile(r"```[ \t]*([\w+.-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
PYTHON_TAGS = frozenset({"", "python", "py", "python3"})
RESULT = "@@emery-code-tests"
"""The prefix of the worker's one result line on stdout (the code may print too), followed
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


def program(code: str, example: Example, entry_point_field: str, prompt_field: str) -> str:
    """The code to test: the reply's, or, when it does not define the example's entry point
    and the example has a prompt (a signature and docstring), the prompt followed by the
    reply (a body written to complete it)."""
    inputs = example.input if isinstance(example.input, dict) else {}
    entry = inputs.get(entry_point_field)
    prompt = inputs.get(prompt_field)
    if not isinstance(entry, str) or not isinstance(prompt, str):
        return code
    if re.search(rf"^\s*(?:async\s+)?def\s+{re.escape(entry)}\s*\(", code, re.MULTILINE):
        return code
    return prompt.rstrip("\n") + "\n" + code


# The worker: caps its own resources (argv: memory in MB, CPU seconds), reads {"code",
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
    """Run ``code`` then ``tests`` in a worker process: (passed, feedback)."""
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
    """Kill the worker's whole session (anything it started too)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


class CodeTests:
    """Score 1 when the reply's code passes the example's tests (``expected``: Python code
    that asserts, e.g. HumanEval's ``check(candidate)`` and its call), 0 otherwise."""

    needs_expected = True

    def __init__(
        self,
        *,
        timeout_s: float = 10.0,
        memory_mb: int = 512,
        entry_point_field: str = "entry_point",
        prompt_field: str = "prompt",
    ) -> None:
        self.timeout_s = timeout_s
        self.memory_mb = memory_mb
        self.entry_point_field = entry_point_field
        self.prompt_field = prompt_field

    async def verify(self, example: Example, output: Any, trace: Any = None) -> Verdict:
        tests = as_text(example.expected)
        if not tests.strip():
            raise ValueError(f"example {example.id}: no test code in expected")
        inputs = example.input if isinstance(example.input, dict) else {}
        entry = inputs.get(self.entry_point_field)
        code = read_code(as_text(output), entry if isinstance(entry, str) else None)
        if not code:
            return Verdict(score=0.0, feedback="The reply has no code.")
        source = program(code, example, self.entry_point_field, self.prompt_field)
        passed, feedback = await run_tests(
            source, tests, timeout_s=self.timeout_s, memory_mb=self.memory_mb
        )
        if passed:
            return Verdict(score=1.0, feedback="Correct: every test passed.")
        return Verdict(score=0.0, feedback=f"Wrong: {clip(feedback, 400)}.")
