"""Verifier callables that configs name as ``verifier_funcs:<attr>`` in the unit tests."""

from __future__ import annotations

from typing import Any

from emery.core.models import Example

NOT_CALLABLE = 42


def starts_with_expected(example: Example, output: Any) -> bool:
    return str(output).startswith(str(example.expected))
