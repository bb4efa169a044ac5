"""A user environment for a code-harness agent: a small warehouse that takes orders.

Plain Python (no emery import). emery makes a fresh `Warehouse()` for each episode, calls
`reset(task)` with the example's input (it returns the instruction the agent sees), runs
each tool call the agent makes through `execute`, and asks `check(answer)` for the score
and a feedback sentence. `check` reads the warehouse's own state, so it scores what the
agent did (which orders it placed), not only what it said.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

TOOLS = [
    {
        "name": "stock",
        "description": "How many units of an item the warehouse holds.",
        "parameters": {"item": "text"},
    },
    {
        "name": "price",
        "description": "The unit price of an item, in euros.",
        "parameters": {"item": "text"},
    },
    {
        "name": "order",
        "description": "Place an order for a customer: ships `quantity` units of `item`.",
        "parameters": {"item": "text", "quantity": "integer"},
    },
]


class Warehouse:
    """Tools `stock`, `price` and `order` over the task's stock and prices."""

    tools = TOOLS

    def __init__(self) -> None:
        self.stock: dict[str, int] = {}
        self.prices: dict[str, float] = {}
        self.item = ""
        self.quantity = 0
        self.available = 0
        self.orders: list[tuple[str, int]] = []

    def reset(self, task: Mapping[str, Any]) -> str:
        self.stock = {str(k): int(v) for k, v in dict(task["stock"]).items()}
        self.prices = {str(k): float(v) for k, v in dict(task["prices"]).items()}
        self.item, self.quantity = str(task["item"]), int(task["quantity"])
        self.available = self.stock[self.item]
        self.orders = []
        return (
            f"A customer asks for {self.quantity} x {self.item}. If the warehouse has enough"
            " in stock, order them for the customer and answer with the total price in euros"
            " (e.g. 13.50); if it has not, do not order and answer 'out of stock'."
        )

    def execute(self, action: Mapping[str, Any]) -> dict[str, Any]:
        arguments = dict(action.get("arguments") or {})
        item = str(arguments.get("item", "")).strip().lower()
        if item not in self.stock:
            return {"text": f"unknown item {item!r} (items: {', '.join(self.stock)})", "ok": False}
        if action["tool"] == "stock":
            return {"text": f"{self.stock[item]} in stock"}
        if action["tool"] == "price":
            return {"text": f"{self.prices[item]:.2f} euros per unit"}
        try:
            quantity = int(arguments.get("quantity", 0))
        except (TypeError, ValueError):
            return {"text": "quantity must be a whole number", "ok": False}
        if not 0 < quantity <= self.stock[item]:
            return {"text": f"cannot order {quantity}: {self.stock[item]} in stock", "ok": False}
        self.stock[item] -= quantity
        self.orders.append((item, quantity))
        return {"text": f"ordered {quantity} x {item}"}

    def check(self, answer: str) -> tuple[float, str]:
        """1 when the orders and the answer are both right; 0.5 when only the answer is."""
        total = self.quantity * self.prices[self.item]
        if self.quantity > self.available:
            if self.orders:
                return 0.0, "There was not enough stock, yet an order was placed."
            if "out of stock" in answer.lower():
                return 1.0, "Correctly answered out of stock without ordering."
            return 0.0, f"Too few in stock: the answer should be 'out of stock', not {answer!r}."
        numbers = re.findall(r"\d+(?:\.\d+)?", answer.replace(",", ""))
        right_answer = bool(numbers) and abs(float(numbers[-1]) - total) < 0.005
        ordered = self.orders == [(self.item, self.quantity)]
        if right_answer and ordered:
            return 1.0, f"Ordered {self.quantity} x {self.item} and answered {total:.2f}."
        if right_answer:
            return 0.5, (
                f"The total {total:.2f} is right but the order was never placed: call order"
                f" for {self.quantity} x {self.item} before submitting."
            )
        if ordered:
            return 0.5, f"The order is right but the answer should be the total {total:.2f}."
        return 0.0, f"No order of {self.quantity} x {self.item} and the total is {total:.2f}."
