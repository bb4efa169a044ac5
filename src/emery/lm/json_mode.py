"""JSON mode: a stage whose parser reads a JSON object asks its model for one, where the
model's provider can be told so (``response_format``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from emery.core.models import ChatMessage
from emery.lm.base import LM
from emery.lm.wrapper import unwrapped

JSON_OBJECT: dict[str, Any] = {"type": "json_object"}


def json_mode_params(lm: LM, messages: Sequence[ChatMessage]) -> dict[str, Any]:
    """``{"response_format": {"type": "json_object"}}`` when the model under ``lm``'s
    wrappers takes it (its ``json_mode`` is true: a hosted model that has not rejected it)
    and the messages say "JSON" (OpenAI refuses JSON mode for messages that do not); else
    nothing: the parser then reads the JSON out of whatever the reply holds."""
    if not getattr(unwrapped(lm), "json_mode", False):
        return {}
    if not any("json" in str(message.get("content") or "").lower() for message in messages):
        return {}
    return {"response_format": JSON_OBJECT}
