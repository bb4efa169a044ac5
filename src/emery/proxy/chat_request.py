"""The chat completion request the LM proxy accepts, validated before any model is called:
a malformed request is a 400 with the field at fault, never a 5xx."""

from __future__ import annotations

import json
import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from emery.core.models import ChatMessage
from emery.proxy.guards import has_lone_surrogate


class BadRequest(Exception):
    """A client's mistake: answered with ``status`` and the message."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class ContentPart(BaseModel):
    """One part of a multi-part message; only text parts carry text here."""

    model_config = ConfigDict(extra="allow")

    type: str = "text"
    text: str | None = None


class Message(BaseModel):
    """A chat message; tool-call fields are accepted and ignored."""

    model_config = ConfigDict(extra="allow")

    role: str
    content: str | list[ContentPart] | None = None
    name: str | None = None

    def as_chat(self) -> ChatMessage:
        """The message as emery's ``ChatMessage`` (content parts joined as text)."""
        content = self.content
        if isinstance(content, list):
            content = "".join(part.text or "" for part in content)
        message: ChatMessage = {"role": self.role, "content": content or ""}
        if self.name:
            message["name"] = self.name
        return message


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")

    include_usage: bool = False


class ChatRequest(BaseModel):
    """The fields of an OpenAI chat completion request the proxy uses; others pass."""

    model_config = ConfigDict(extra="allow")

    model: str = ""
    messages: list[Message] = Field(min_length=1)
    temperature: float | None = Field(default=None, ge=0)
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    stop: str | list[str] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    tools: list[dict[str, Any]] | None = None

    @field_validator("temperature")
    @classmethod
    def _finite(cls, value: float | None) -> float | None:
        if value is not None and not math.isfinite(value):
            raise ValueError("must be a finite number")
        return value

    def sampling(self) -> dict[str, Any]:
        """The sampling parameters to forward to the model."""
        params: dict[str, Any] = {}
        if self.temperature is not None:
            params["temperature"] = self.temperature
        max_tokens = self.max_tokens or self.max_completion_tokens
        if max_tokens is not None:
            params["max_tokens"] = max_tokens
        stops = [self.stop] if isinstance(self.stop, str) else list(self.stop or ())
        if any(stops):  # an empty stop string stops nothing (and breaks some models)
            params["stop"] = [stop for stop in stops if stop]
        return params

    def chat_messages(self) -> list[ChatMessage]:
        return [message.as_chat() for message in self.messages]


def parse_chat_request(raw: bytes) -> ChatRequest:
    """The request in ``raw``; BadRequest says what is wrong with it."""
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        raise BadRequest("the body must be JSON (UTF-8, not nested too deeply)") from None
    if not isinstance(data, dict):
        raise BadRequest("the body must be a JSON object")
    if has_lone_surrogate(data):
        raise BadRequest("the body holds an invalid unicode escape (a lone surrogate)")
    try:
        return ChatRequest.model_validate(data)
    except ValidationError as exc:
        raise BadRequest(describe(exc)) from None


def describe(exc: ValidationError) -> str:
    """The first validation problem as ``field: message``."""
    first = exc.errors(include_url=False)[0]
    where = ".".join(str(part) for part in first["loc"]) or "body"
    return f"{where}: {first['msg']}"
