"""Read a user's text file (a config, a dataset) with one-line errors for what can go wrong."""

from __future__ import annotations

from pathlib import Path

from emery.core.errors import EmeryError


def read_error(path: Path, exc: OSError | UnicodeDecodeError) -> str:
    """Why ``path`` could not be read, in words: permissions, a folder, bad encoding."""
    if isinstance(exc, UnicodeDecodeError):
        return f"{path}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})"
    if isinstance(exc, PermissionError):
        return f"{path}: cannot read the file (permission denied)"
    if isinstance(exc, IsADirectoryError):
        return f"{path}: is a folder, not a file"
    return f"{path}: cannot read the file ({exc.strerror or exc})"


def read_text(path: Path, error: type[EmeryError]) -> str:
    """The UTF-8 text of ``path`` (a leading byte-order mark dropped); raises ``error``
    with a one-line message when it cannot be read."""
    try:
        return path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise error(read_error(path, exc)) from None
