"""Safe arithmetic: evaluate ``+ - * / ** %`` and parentheses on numbers, nothing else."""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable

OPERATORS: dict[type[ast.AST], Callable[..., float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}
MAX_EXPONENT = 100


def evaluate(expression: str) -> float:
    """The value of ``expression``; ValueError for anything but arithmetic on numbers."""
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError:
        raise ValueError(f"not an arithmetic expression: {expression!r}") from None
    return _value(tree.body)


def _value(node: ast.AST) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        if isinstance(node.value, bool):
            raise ValueError("booleans are not numbers here")
        return float(node.value)
    if isinstance(node, ast.UnaryOp) and type(node.op) in OPERATORS:
        return OPERATORS[type(node.op)](_value(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in OPERATORS:
        left, right = _value(node.left), _value(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise ValueError("exponent too large")
        try:
            return OPERATORS[type(node.op)](left, right)
        except ZeroDivisionError:
            raise ValueError("division by zero") from None
    raise ValueError(f"unsupported syntax: {ast.unparse(node)!r}")


def number_text(value: float) -> str:
    """A number without a trailing ``.0`` and with at most 6 decimals."""
    rounded = round(value, 6)
    return str(int(rounded)) if rounded == int(rounded) else f"{rounded:g}"
