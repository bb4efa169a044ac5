"""Read API keys and other settings from a ``.env`` file into the environment.

Lines are ``KEY=VALUE`` (an ``export`` before the key is allowed); blank lines and ``#``
comments are skipped; a value may be quoted with ``"`` (``\\n``, ``\\"`` and ``\\\\``
escapes read) or ``'`` (read as written), and an unquoted value ends before `` #``. A
variable already set in the environment is kept: the file never overrides it.

Every ``emery`` command reads ``./.env`` when it starts, and so do ``emery.optimize`` and
``emery.Job.create``. A file named explicitly (``--env-file``, ``env_file=``) is read
after it, and its values replace those ``./.env`` set, never the environment's own."""

from __future__ import annotations

import os
import re
from pathlib import Path

from emery.core.errors import ConfigError
from emery.core.files import read_text

DEFAULT_ENV_FILE = Path(".env")
_LINE = re.compile(r"^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$")
_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\"}


def parse_env(text: str, source: str) -> dict[str, str]:
    """The variables of a ``.env`` file's ``text``; ConfigError naming ``source:line``."""
    found: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        match = _LINE.match(stripped)
        if match is None:
            raise ConfigError(f"{source}:{number}: expected KEY=VALUE, not {clip_line(stripped)}")
        found[match.group(1)] = _value(match.group(2), f"{source}:{number}")
    return found


def _value(raw: str, where: str) -> str:
    if raw[:1] in ('"', "'"):
        quote = raw[0]
        end = _closing(raw, quote)
        if end is None:
            raise ConfigError(f"{where}: the value's {quote} quote is not closed")
        rest = raw[end + 1 :].strip()
        if rest and not rest.startswith("#"):
            raise ConfigError(f"{where}: unexpected text after the quoted value")
        inner = raw[1:end]
        if quote == "'":
            return inner
        return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(0)), inner)
    return re.split(r"\s+#", raw, maxsplit=1)[0].strip()


def _closing(raw: str, quote: str) -> int | None:
    index = 1
    while index < len(raw):
        if raw[index] == "\\" and quote == '"':
            index += 2
            continue
        if raw[index] == quote:
            return index
        index += 1
    return None


def clip_line(line: str, limit: int = 40) -> str:
    """The line as shown in an error: its start only (it may hold a secret's value)."""
    shown = line.split("=", 1)[0] if "=" in line else line
    return repr(shown[:limit] + ("..." if len(shown) > limit else ""))


_from_default: dict[str, str] = {}
"""The variables this process set from ``./.env``, with their values."""


def load_env_file(path: Path | None = None, *, option: str = "--env-file") -> list[str]:
    """Set the variables of ``path`` (default: ``./.env`` when there is one) that the
    environment does not have yet, or (for a ``path`` given) has only from ``./.env``; the
    names it set. A ``path`` given that is missing is a ConfigError naming ``option``."""
    if path is None:
        if not DEFAULT_ENV_FILE.is_file():
            return []
        values = parse_env(read_text(DEFAULT_ENV_FILE, ConfigError), str(DEFAULT_ENV_FILE))
        added = [name for name in values if name not in os.environ]
        _from_default.update((name, values[name]) for name in added)
    else:
        if not path.is_file():
            raise ConfigError(f"{option} {path}: file not found")
        values = parse_env(read_text(path, ConfigError), str(path))
        added = [
            name
            for name in values
            if name not in os.environ or _from_default.get(name) == os.environ[name]
        ]
        for name in added:
            _from_default.pop(name, None)
    for name in added:
        os.environ[name] = values[name]
    return added
