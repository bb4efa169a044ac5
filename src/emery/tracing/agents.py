"""Which agent made an LM call: ``gen_ai.agent.name`` on its ``chat`` span.

A multi-agent system says which of its agents is calling with ``as_agent(name)`` around
the calls (in-process: the traced LM and the ``openai`` instrumentation), or with the
``X-Emery-Agent`` header on requests to the LM proxy. Spans from other frameworks carry
the name themselves (the GenAI convention's ``invoke_agent`` span above the calls). RL on
agents trains the calls of one agent by this name.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

AGENT_HEADER = "x-emery-agent"
"""The request header that names the agent of a call through the LM proxy."""

_agent: ContextVar[str | None] = ContextVar("emery_agent_name", default=None)


@contextmanager
def as_agent(name: str) -> Iterator[None]:
    """LM calls made inside are recorded as agent ``name``'s."""
    if not isinstance(name, str) or not name:
        raise ValueError("as_agent needs a non-empty agent name")
    token = _agent.set(name)
    try:
        yield
    finally:
        _agent.reset(token)


def current_agent() -> str | None:
    """The agent named by the innermost ``as_agent`` (None outside one)."""
    return _agent.get()
