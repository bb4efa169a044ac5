"""What a stage's reply must look like, derived from its parser.

Used three ways: the program description tells the proposer the format, a format
sentence can be added to an instruction ("End your reply with a line 'Answer: <number>'"),
and labeled demos write the gold output in a form the parser accepts.

Each parser kind's format is a small ``ReplyFormat`` strategy (``FORMATS``): the sentence,
the description and the labeled reply's prefix.

Labeled replies are built from the gold value as follows (first form the parser reads back
and the verifier accepts wins):

- ``regex`` parser: the literal text before the pattern's first capture group followed
  by the gold value (``Answer:\\s*\\$?(...)`` gives ``"Answer: 42"``), then the bare value;
- ``json`` and ``json_object`` parsers: the gold value as JSON (a JSON string as it is);
- ``raw``, ``last_line`` and ``code``: the gold value as text (JSON for dicts and lists);
  a gold value that is not a reply (a ``code_tests`` row's tests) makes no labeled reply,
  since the verifier does not accept it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from emery.systems.parsers import ParseError, ParserConfig
from emery.verifiers.base import as_text

if TYPE_CHECKING:
    from emery.systems.stages import StageConfig

_CLASS_ESCAPES = set("dDwWsSbBAZzGntrfv0123456789")


def regex_prefix(pattern: str) -> str | None:
    """The literal text a regex requires before its first capture group, or None.

    Handles literals, escaped punctuation, ``\\s`` (as one space) and optional tokens
    (``x?``, ``x*``: dropped, except whitespace which keeps one space). Anything else
    before the group (classes, alternation, wildcards) gives None.
    """
    tokens: list[str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "(":
            if pattern.startswith("(?", i) and not pattern.startswith("(?P<", i):
                return None
            return "".join(tokens)
        if char == "^" and i == 0:
            i += 1
            continue
        if char == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            if nxt == "s":
                tokens.append(" ")
            elif nxt in _CLASS_ESCAPES:
                return None
            else:
                tokens.append(nxt)
            i += 2
            continue
        if char in "?*":
            if tokens and tokens[-1] != " ":
                tokens.pop()
            i += 1
            continue
        if char == "+":
            i += 1
            continue
        if char == "{":
            end = pattern.find("}", i)
            if end < 0:
                return None
            if pattern[i + 1 : end].split(",")[0].strip() == "0" and tokens:
                tokens.pop()
            i = end + 1
            continue
        if char in ".[]|$)":
            return None
        tokens.append(char)
        i += 1
    return None


def _value_word(parser: ParserConfig) -> str:
    """ "number" when the captured group is numeric, else "answer"."""
    pattern = parser.pattern or ""
    prefix_end = pattern.find("(")
    group = pattern[prefix_end:] if prefix_end >= 0 else pattern
    wordy = ("\\w", ".*", ".+", "[a-z", "[A-Z")
    numeric = "\\d" in group and not any(token in group for token in wordy)
    return "number" if numeric else "answer"


class ReplyFormat:
    """What one parser kind asks of a reply: the whole reply, read as it is (``raw``).

    Each parser kind has one of these strategies (``FORMATS``); ``reads_part`` says the
    parser reads a part of a longer reply, so the reply may reason before the answer.
    """

    reads_part = False

    def sentence(self, parser: ParserConfig, gold_example: Any = None) -> str | None:
        """An instruction sentence stating the reply format, or None (no format to state)."""
        return None

    def description(self, parser: ParserConfig) -> str:
        """How the reply is read, in words, for the program description."""
        return "the whole reply is the output"

    def reply_prefix(self, parser: ParserConfig) -> str | None:
        """Literal text a labeled reply writes before the gold value, or None."""
        return None


class LastLineFormat(ReplyFormat):
    """``last_line``: the answer alone on the reply's last line."""

    reads_part = True

    def sentence(self, parser: ParserConfig, gold_example: Any = None) -> str | None:
        return "Put the final answer alone on the last line of your reply."

    def description(self, parser: ParserConfig) -> str:
        return "the last non-empty line of the reply is the output"


class RegexFormat(ReplyFormat):
    """``regex``: a final line that starts with the literal text before the pattern's group."""

    reads_part = True

    def sentence(self, parser: ParserConfig, gold_example: Any = None) -> str | None:
        prefix = self.reply_prefix(parser)
        if prefix and prefix.strip():
            return (
                f"End your reply with a final line of the form '{prefix.strip()} "
                f"<{_value_word(parser)}>'."
            )
        return None

    def description(self, parser: ParserConfig) -> str:
        sentence = self.sentence(parser)
        extra = f" ({sentence})" if sentence else ""
        return f"the reply must match the regex {parser.pattern!r}{extra}"

    def reply_prefix(self, parser: ParserConfig) -> str | None:
        return regex_prefix(parser.pattern) if parser.pattern else None


class JsonFormat(ReplyFormat):
    """``json``: a JSON value; the keys of an object-valued gold example are named."""

    reads_part = True

    def sentence(self, parser: ParserConfig, gold_example: Any = None) -> str | None:
        if isinstance(gold_example, dict) and gold_example:
            keys = ", ".join(f'"{key}"' for key in gold_example)
            return f"Reply with a JSON object with the keys {keys}."
        return "Reply with a JSON object."

    def description(self, parser: ParserConfig) -> str:
        return "the reply must contain a JSON value"


class JsonObjectFormat(ReplyFormat):
    """``json_object``: one JSON object, ``{}`` when there is nothing to put in it.

    No gold example's keys are named: in extraction tasks they differ from row to row."""

    reads_part = True

    def sentence(self, parser: ParserConfig, gold_example: Any = None) -> str | None:
        return "Reply with a JSON object and nothing else ({} if there is nothing to put in it)."

    def description(self, parser: ParserConfig) -> str:
        return (
            "the reply must contain a JSON object (the first {...} that parses is the output,"
            " one in a ```json fence first)"
        )


class CodeFormat(ReplyFormat):
    """``code``: Python code, in a fenced block when the reply says more than the code."""

    reads_part = True

    def sentence(self, parser: ParserConfig, gold_example: Any = None) -> str | None:
        return "Reply with the complete Python code in one ```python code block."

    def description(self, parser: ParserConfig) -> str:
        return (
            "the reply's Python code is the output (a ```python fenced block, the first that"
            " defines a function, else the whole reply)"
        )


FORMATS: dict[str, ReplyFormat] = {
    "raw": ReplyFormat(),
    "last_line": LastLineFormat(),
    "regex": RegexFormat(),
    "json": JsonFormat(),
    "json_object": JsonObjectFormat(),
    "code": CodeFormat(),
}
"""The reply format of each parser kind."""


def reply_format(parser: ParserConfig) -> ReplyFormat:
    """The reply format ``parser`` reads."""
    return FORMATS[parser.kind]


def format_sentence(stage: StageConfig, gold_example: Any = None) -> str | None:
    """An instruction sentence stating the reply format the stage's parser needs, or None."""
    return reply_format(stage.parser).sentence(stage.parser, gold_example)


def format_description(stage: StageConfig) -> str:
    """How the stage's reply is read, in words, for the program description."""
    return reply_format(stage.parser).description(stage.parser)


def gold_text(value: Any) -> str:
    """A gold value as reply text: strings as they are, dicts and lists as JSON."""
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False)
    return as_text(value)


def labeled_replies(stage: StageConfig, gold: Any) -> list[str]:
    """Reply texts to try for a labeled demo, best first (see the module docstring)."""
    value = gold_text(gold)
    if not value.strip():
        return []
    forms: list[str] = []
    prefix = reply_format(stage.parser).reply_prefix(stage.parser)
    if prefix:
        forms.append(prefix.rstrip() + " " + value if prefix.endswith(" ") else prefix + value)
    forms.append(value)
    return list(dict.fromkeys(forms))


def parse_reply(stage: StageConfig, reply: str) -> tuple[bool, Any]:
    """(True, parsed output) when the stage's parser reads ``reply``, else (False, None)."""
    try:
        return True, stage.parser.parse(reply)
    except ParseError:
        return False, None
