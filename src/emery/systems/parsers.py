"""Turn a stage's raw reply into its output value."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import model_validator

from emery.core.settings import Settings
from emery.verifiers.base import clip
from emery.verifiers.code_run import read_code
from emery.verifiers.json_field import extract_json
from emery.verifiers.json_reply import read_json_object


class ParseError(ValueError):
    """A reply does not have the shape the stage's parser expects."""


class ParserConfig(Settings):
    """``raw`` (whole reply), ``last_line``, ``regex`` (group 1 or whole match), ``json``
    (any JSON value), ``json_object`` (the first JSON object, fenced ones first; see
    ``verifiers.json_reply``) or ``code`` (the Python code: a fenced block, the first that
    defines a function, else the reply; see ``verifiers.code_run``)."""

    kind: Literal["raw", "last_line", "regex", "json", "json_object", "code"] = "raw"
    pattern: str | None = None
    ignore_case: bool = True

    @model_validator(mode="after")
    def _pattern_for_regex(self) -> ParserConfig:
        if self.kind == "regex":
            if not self.pattern:
                raise ValueError("parser.pattern is required when kind = 'regex'")
            try:
                re.compile(self.pattern)
            except re.error as exc:
                raise ValueError(
                    f"parser.pattern {self.pattern!r} is not a valid regex: {exc}"
                ) from None
        return self

    def parse(self, text: str) -> Any:
        """The value of ``text``, or ParseError saying what shape was expected."""
        match self.kind:
            case "raw":
                return text.strip()
            case "last_line":
                lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
                if not lines:
                    raise ParseError("the reply is empty")
                return lines[-1]
            case "regex":
                assert self.pattern is not None
                flags = re.IGNORECASE | re.DOTALL if self.ignore_case else re.DOTALL
                found = list(re.finditer(self.pattern, text, flags))
                if not found:
                    raise ParseError(
                        f"the reply must match the pattern {self.pattern!r} but was {clip(text)!r}"
                    )
                last = found[-1]
                return (last.group(1) if last.groups() else last.group(0)).strip()
            case "json":
                try:
                    return extract_json(text)
                except ValueError as exc:
                    raise ParseError(str(exc)) from None
            case "json_object":
                try:
                    return read_json_object(text)
                except ValueError as exc:
                    raise ParseError(str(exc)) from None
            case "code":
                code = read_code(text)
                if not code:
                    raise ParseError("the reply is empty")
                return code
