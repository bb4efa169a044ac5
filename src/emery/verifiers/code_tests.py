"""Code that must pass its tests: the reply's Python code, run with the example's test code
in a test process under a time and a memory limit. Pass (1) when every assert holds;
the feedback of a fail names the first failing assert and what its left side was, or the
exception the code raised, never the rest of the tests.

The test process is a fresh ``python -I`` process in an empty temporary folder, in a session of
its own (killed whole at the time limit), that caps its own address space, CPU time and
file size (``resource.setrlimit``) before it runs anything. That bounds a runaway reply;
it is not a sandbox: the code runs as the job's user, can read what that user can and
reach the network. Run code tasks on a machine (or a container) you would run the model's
code on.
"""

from __future__ import annotations

from typing import Any

from emery.core.models import Example
from emery.verifiers.base import Verdict, as_text
from emery.verifiers.code_run import score_code


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
        entry, prompt = inputs.get(self.entry_point_field), inputs.get(self.prompt_field)
        score, feedback = await score_code(
            as_text(output),
            tests,
            entry_point=entry if isinstance(entry, str) else None,
            prompt=prompt if isinstance(prompt, str) else None,
            timeout_s=self.timeout_s,
            memory_mb=self.memory_mb,
        )
        return Verdict(score=score, feedback=feedback)
