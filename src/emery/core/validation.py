"""Turn pydantic validation errors into one-line messages that name the key."""

from __future__ import annotations

import difflib
import types
import typing
from typing import Any

from pydantic import BaseModel, ValidationError


def _model_at(root: type[BaseModel], path: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The model class that holds the last key of ``path``, following field annotations."""
    current: Any = root
    for part in path:
        current = _unwrap(current)
        if isinstance(part, int):
            continue
        if isinstance(current, type) and issubclass(current, BaseModel):
            field = current.model_fields.get(part)
            if field is None:
                return None
            current = field.annotation
        else:
            current = _unwrap_container(current)
    current = _unwrap(current)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _unwrap(annotation: Any) -> Any:
    """Strip Optional, list and dict wrappers down to one model class when there is one."""
    for _ in range(5):
        origin = typing.get_origin(annotation)
        if origin in (typing.Union, types.UnionType):
            members = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(members) != 1:
                return annotation
            annotation = members[0]
        elif origin in (list, tuple, set, frozenset) or origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        else:
            return annotation
    return annotation


def _unwrap_container(annotation: Any) -> Any:
    if typing.get_origin(annotation) is dict:
        return typing.get_args(annotation)[1]
    return annotation


def describe(error: ValidationError, root: type[BaseModel], prefix: str = "") -> str:
    """The first error of ``error`` as ``key: problem``, suggesting the nearest valid key."""
    errors = error.errors()
    # A misspelled key is reported both as unknown and (for a required one) as missing;
    # the unknown key, with its suggestion, is the message that helps.
    first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    # pydantic's union branch names ("list[str]") are not keys; a key of the config that
    # holds "[" is one, and stays when nothing else is left
    loc = tuple(part for part in first["loc"] if not (isinstance(part, str) and "[" in part))
    loc = loc or tuple(first["loc"])
    key = ".".join(str(part) for part in (*([prefix] if prefix else []), *loc)) or "config"
    if first["type"] == "extra_forbidden":
        parent = _model_at(root, loc[:-1])
        message = f"unknown key {key!r}"
        if parent is not None:
            matches = difflib.get_close_matches(str(loc[-1]), list(parent.model_fields), n=1)
            if matches:
                message += f"; did you mean {matches[0]!r}?"
            else:
                message += f"; valid keys: {', '.join(parent.model_fields)}"
        return message
    if first["type"] == "missing":
        return f"missing required key {key!r}"
    msg = first["msg"]
    if msg.startswith("Value error, "):
        msg = msg.removeprefix("Value error, ")
    return f"{key}: {msg}"
