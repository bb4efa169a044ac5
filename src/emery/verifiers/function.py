"""A Python function as a verifier: a metric function as DSPy and gepa users write it
(``emery.optimize(verifier=fn)``), and ``[verifier] kind = "python"`` (``function =
"module:attr"``), one implementation for both.

``metric(example, output)`` or DSPy's ``metric(example, pred, trace=None)``, sync or
async, returning a number or bool (the score, in [0, 1]), a ``(score, feedback)`` pair, a
``{"score", "feedback"}`` dict, or an object with ``.score`` and an optional ``.feedback``
(``dspy.Prediction(score=..., feedback=...)``).

What the function receives:

- ``example`` is a ``MetricExample``: emery's ``Example`` fields as they are (``id``,
  ``input``, ``expected``, ``meta``) and, as attributes or items, its input fields
  (``example.question``), the gold output's fields when the gold output is a dict
  (``example.answer`` for ``expected = {"answer": ...}``), its ``meta`` keys, and a scalar
  gold output under the names DSPy datasets give it (``answer``, ``label``, ``gold``,
  ``target``, ``reference``). The first of these places that has the name wins;
  ``example.example`` is the ``Example`` itself.
- ``output`` is the system's output; a dict output comes as a dict whose keys are also
  attributes (``pred.answer``).
- A third parameter with a default (DSPy's ``trace=None``) is left at its default: emery
  calls the metric in DSPy's evaluation mode. A required third parameter gets the run's
  record (``SystemRun``: output, component calls); so does any third parameter of a
  ``python`` verifier (``style="verifier"``), whose functions are written for emery.

A function that raises (a metric's exception is re-raised as a ``MetricError`` naming it; a
``python`` verifier's as it is), or returns a score outside [0, 1] or a value of another
type, is that rollout's verifier error: the example scores 0 with the error as its feedback, and a
job whose rollouts mostly fail that way stops saying so (``evaluation.health``).
"""

from __future__ import annotations

import inspect
import math
import numbers
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Literal

from emery.core.errors import ConfigError
from emery.core.imports import import_object
from emery.core.models import Example
from emery.core.user_code import UserCodeExited, call_user_function
from emery.verifiers.base import Verdict, clip

GOLD_NAMES: tuple[str, ...] = ("answer", "label", "gold", "target", "reference")
"""Names under which a metric finds a gold output that is not a dict."""

_FIELDS = ("id", "input", "expected", "meta")

Style = Literal["metric", "verifier"]
"""Whose conventions a function follows: a DSPy or gepa metric's (a third parameter with a
default keeps it; errors name the metric) or a ``python`` verifier's (any third parameter
gets the run's record; errors are the verifier's own)."""


class MetricError(ValueError):
    """A metric function raised, or returned something that is not a score in [0, 1]."""


class MetricExample:
    """An ``Example`` as a metric function reads it (see the module docstring): emery's
    fields, plus input, gold and ``meta`` fields by name, as ``example.name`` or
    ``example["name"]``."""

    __slots__ = ("example",)

    def __init__(self, example: Example) -> None:
        self.example = example

    @property
    def id(self) -> str:
        return self.example.id

    @property
    def input(self) -> dict[str, Any]:
        return self.example.input

    @property
    def expected(self) -> Any:
        return self.example.expected

    @property
    def meta(self) -> dict[str, Any]:
        return self.example.meta

    def _places(self) -> Iterator[Mapping[str, Any]]:
        expected = self.example.expected
        yield self.example.input
        if isinstance(expected, Mapping):
            yield expected
        yield self.example.meta
        if expected is not None and not isinstance(expected, Mapping):
            yield dict.fromkeys(GOLD_NAMES, expected)

    def _lookup(self, name: str) -> tuple[bool, Any]:
        if name in _FIELDS:
            return True, getattr(self.example, name)
        for place in self._places():
            if name in place:
                return True, place[name]
        return False, None

    def keys(self) -> list[str]:
        """Every name this example answers to."""
        names = dict.fromkeys(_FIELDS)
        for place in self._places():
            names.update(dict.fromkeys(place))
        return list(names)

    def _missing(self, name: str) -> str:
        fields = ", ".join(key for key in self.keys() if key not in _FIELDS)
        gold = " and no gold output" if self.example.expected is None else ""
        return (
            f"example {self.example.id} has no field {name!r}{gold}; it has id, input,"
            f" expected, meta{', ' + fields if fields else ''}"
        )

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        found, value = self._lookup(name)
        if not found:
            raise AttributeError(self._missing(name))
        return value

    def __getitem__(self, name: str) -> Any:
        found, value = self._lookup(name)
        if not found:
            raise KeyError(self._missing(name))
        return value

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._lookup(name)[0]

    def get(self, name: str, default: Any = None) -> Any:
        found, value = self._lookup(name)
        return value if found else default

    def __repr__(self) -> str:
        return f"MetricExample(id={self.id!r}, input={self.input!r}, expected={self.expected!r})"


class OutputFields(dict[str, Any]):
    """A dict output whose keys are also attributes (``pred.answer``), as DSPy's
    ``Prediction`` reads."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(
                f"the output has no field {name!r}; it has {', '.join(self) or 'none'}"
            ) from None


def metric_output(output: Any) -> Any:
    """The output as the metric receives it: a dict with attribute access, else as is."""
    if isinstance(output, dict) and all(isinstance(key, str) for key in output):
        return OutputFields(output)
    return output


def metric_arity(fn: Callable[..., Any], *, style: Style = "metric") -> int:
    """How many positional arguments to pass ``fn``: 2 (example, output) or 3 (also the
    run) when it has a third parameter without a default (or any third parameter, in the
    ``verifier`` style). A function that cannot take (example, output) is a ConfigError."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # a builtin without a signature: the common form
        return 2
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    spread = any(p.kind == p.VAR_POSITIONAL for p in params)
    required = [p for p in positional if p.default is p.empty]
    keyword_only = [p.name for p in params if p.kind == p.KEYWORD_ONLY and p.default is p.empty]
    if keyword_only or len(required) > 3 or (len(positional) < 2 and not spread):
        raise ConfigError(
            f"verifier: the metric {name_of(fn)}{inspect.signature(fn)} cannot be called as"
            " metric(example, output) or metric(example, pred, trace=None)"
        )
    if style == "verifier" and (len(positional) >= 3 or any(p.name == "trace" for p in params)):
        return 3
    return 3 if len(required) == 3 else 2


def name_of(fn: Callable[..., Any]) -> str:
    """The function's name, for messages (a nested function's without its outer ones)."""
    name = str(getattr(fn, "__qualname__", None) or type(fn).__name__)
    return name.rpartition("<locals>.")[2]


def metric_verdict(result: Any, metric: str, example_id: str) -> Verdict:
    """The verdict a metric's return value gives; a MetricError for anything else."""
    if isinstance(result, Verdict):
        return result
    score: Any
    feedback: Any = ""
    if isinstance(result, bool | numbers.Real):
        score = result
    elif isinstance(result, tuple | list) and len(result) == 2:
        score, feedback = result
    elif isinstance(result, Mapping) and "score" in result:
        score, feedback = result["score"], result.get("feedback", "")
    elif result is not None and not isinstance(result, str) and hasattr(result, "score"):
        score, feedback = result.score, getattr(result, "feedback", "")
    elif result is not None and not isinstance(result, str) and hasattr(result, "__float__"):
        score = result  # numpy and torch scalars
    else:
        raise MetricError(
            f"the metric {metric}() returned {clip(repr(result), 60)} for example {example_id};"
            " return a score in [0, 1], a bool, (score, feedback) or an object with .score"
        )
    try:
        value = float(score)
    except (TypeError, ValueError):
        raise MetricError(
            f"the metric {metric}() returned the score {clip(repr(score), 60)} for example"
            f" {example_id}; a score is a number in [0, 1]"
        ) from None
    if not (math.isfinite(value) and 0.0 <= value <= 1.0):
        raise MetricError(
            f"the metric {metric}() returned the score {value:g} for example {example_id};"
            " a score must be in [0, 1]"
        )
    return Verdict(score=value, feedback="" if feedback is None else str(feedback))


class FunctionMetric:
    """A metric function as a ``Verifier`` (see the module docstring); ``fn`` may be named
    as ``"module:attr"``."""

    needs_expected = False

    def __init__(self, fn: Callable[..., Any] | str, *, style: Style = "metric") -> None:
        found = import_object(fn) if isinstance(fn, str) else fn
        if not callable(found):
            raise ConfigError(f"verifier: {fn!r} is not callable")
        self.fn: Callable[..., Any] = found
        self.name = name_of(found)
        self.style = style
        self.arity = metric_arity(found, style=style)

    async def verify(self, example: Example, output: Any, trace: Any = None) -> Verdict:
        """The function's verdict on ``output``; a sync function runs in a thread of its
        own. A metric's exception is re-raised as a ``MetricError`` naming it."""
        args: list[Any] = [MetricExample(example), metric_output(output)]
        if self.arity == 3:
            args.append(trace)
        label = f"metric {self.name}" if self.style == "metric" else "verifier"
        try:
            result = await call_user_function(label, self.fn, *args)
        except UserCodeExited:
            raise
        except Exception as exc:
            if self.style == "verifier":
                raise
            raise MetricError(
                f"the metric {self.name}() raised {type(exc).__name__}: {exc}"
            ) from exc
        return metric_verdict(result, self.name, example.id)

    def __repr__(self) -> str:
        return f"FunctionMetric({self.name})"
