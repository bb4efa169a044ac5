"""What config data must be for every store (and every JSON or UTF-8 encoder) to hold it:
nested at most ``MAX_DEPTH`` levels, and every string, key or value, valid unicode."""

from __future__ import annotations

from typing import Any

from emery.core.errors import ConfigError

MAX_DEPTH = 64
"""Tables and lists within one another; a real config nests fewer than ten. (pydantic
refuses to write data nested past about 250 levels, and Python's JSON recursion past 1000.)"""

_SHOWN_PARTS = 6


def check_storable(data: Any, source: str) -> None:
    """ConfigError naming the first place in ``data`` nested over ``MAX_DEPTH`` levels, or
    holding a string with a lone surrogate (a ``\\ud800`` JSON escape, or a command-line
    byte that is not UTF-8), which no UTF-8 encoder or store accepts."""
    stack: list[tuple[Any, tuple[str, ...]]] = [(data, ())]
    while stack:
        value, path = stack.pop()
        if len(path) > MAX_DEPTH:
            raise ConfigError(f"{_where(source, path)} is nested over {MAX_DEPTH} levels deep")
        if isinstance(value, str):
            _check_text(value, source, path)
        elif isinstance(value, dict):
            for key, item in reversed(value.items()):
                _check_text(str(key), source, (*path, "(a key)"))
                stack.append((item, (*path, str(key))))
        elif isinstance(value, list | tuple):
            stack.extend((item, (*path, str(i))) for i, item in reversed(list(enumerate(value))))


def _check_text(text: str, source: str, path: tuple[str, ...]) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigError(
            f"{_where(source, path)} is not valid unicode: it holds a lone surrogate"
            " (a \\ud800-style escape, or a byte that is not UTF-8)"
        ) from None


def _where(source: str, path: tuple[str, ...]) -> str:
    """``source: a.b.c`` (at most ``_SHOWN_PARTS`` parts, surrogates escaped), or
    ``source`` for the value itself."""
    if not path:
        return source
    shown = ".".join(path[:_SHOWN_PARTS]) + (".…" if len(path) > _SHOWN_PARTS else "")
    return f"{source}: {shown.encode('utf-8', 'backslashreplace').decode('utf-8')}"
