"""What a hosted model's error means, read as its provider means it.

A provider's error is one of four kinds (``Fault.kind``):

- ``rate_limited``: a 429, a 503, Anthropic's 529 or an ``overloaded`` error. The provider
  asks the caller to slow down; the call waits as long as it says (``Retry-After``,
  ``retry-after-ms``, the ``x-ratelimit-reset-*`` and ``anthropic-ratelimit-*-reset``
  headers) and tries again. Never a failed rollout.
- ``transient``: a passing fault (5xx, a timeout, a dropped connection, a body that is not
  a chat completion): retried with backoff, up to the model's ``max_attempts``.
- ``refused``: the provider refuses the job's settings (401/403: the key; 404: the model
  or the URL; a 429 that says the quota or billing is exhausted). No retry changes it:
  ``ProviderRefused`` stops the job with one line naming the setting to fix.
- ``rejected``: this request is refused (400, 413, 422: too long for the context, a
  content filter, a bad parameter): the call fails at once, with no retry.
"""

from __future__ import annotations

import asyncio
import email.utils
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import openai

from emery.core.errors import EmeryError
from emery.lm.base import LMError

FaultKind = Literal["rate_limited", "transient", "refused", "rejected"]

RATE_LIMIT_STATUS = frozenset({429, 503, 529})
TRANSIENT_STATUS = frozenset({408, 409, 425, 500, 502, 504})
OVERLOADED_TYPES = frozenset({"overloaded_error", "rate_limit_error", "rate_limit_exceeded"})
OUT_OF_QUOTA = frozenset({"insufficient_quota", "billing_hard_limit_reached", "billing_not_active"})


class MalformedReply(LMError):
    """A successful HTTP answer whose body is not a chat completion (a proxy's error page,
    a truncated body): worth retrying like a 5xx."""


class ProviderStop(EmeryError):
    """A model's provider stopped the job's progress: not a failed rollout, not retried
    here. Code that runs rollouts lets it through to the job (``provider_stop_in``)."""


class ProviderRefused(ProviderStop):
    """The provider refused the job's settings (key, model, URL, quota): the job stops."""


class ProviderUnavailable(ProviderStop):
    """The provider kept a call waiting on its rate limit past the model's ``max_wait_s``:
    the job pauses, and resuming it tries again."""


@dataclass(frozen=True)
class Fault:
    """What one error means: its kind, the wait the provider asked for (None when it did
    not say) and a one-line reason."""

    kind: FaultKind
    reason: str
    wait_s: float | None = None


def classify(exc: BaseException) -> Fault:
    """The fault ``exc`` is, for an error of the ``openai`` client (LiteLLM's errors are
    subclasses of its classes) or a ``MalformedReply``."""
    if isinstance(exc, MalformedReply):
        return Fault("transient", str(exc))
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        if isinstance(exc, openai.APITimeoutError) and not cannot_connect(exc):
            return Fault("transient", "the request timed out")
        detail = f" ({' '.join(str(cause).split())[:160]})" if cause is not None else ""
        return Fault("transient", f"cannot connect{detail}")
    if not isinstance(exc, openai.APIStatusError):
        return Fault("rejected", f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}")
    status = exc.status_code
    code, kind, message = _error_fields(exc)
    name = next((n for n in (code, kind) if n and n != str(status)), "")
    said = f"{status} {name}".rstrip() + (f": {message}" if message else "")
    headers = _headers(exc)
    if code in OUT_OF_QUOTA or kind in OUT_OF_QUOTA:
        return Fault("refused", f"the account is out of quota ({said}): check its plan and billing")
    if status in RATE_LIMIT_STATUS or kind in OVERLOADED_TYPES or code in OVERLOADED_TYPES:
        return Fault("rate_limited", said, requested_wait(headers))
    if status in (401, 403):
        return Fault(
            "refused",
            f"the API key was refused ({said}): set the model's api_key, or the variable"
            " its api_key_env names (by default OPENAI_API_KEY, or a LiteLLM provider's own such"
            " as ANTHROPIC_API_KEY), e.g. in .env",
        )
    if status == 404:
        return Fault(
            "refused", f"no such model or endpoint ({said}): check the model name and base_url"
        )
    if status in TRANSIENT_STATUS or status >= 500:  # a limit's reset is no reason to wait
        return Fault("transient", said, retry_after(headers))
    return Fault("rejected", said)


def cannot_connect(exc: BaseException) -> bool:
    """Whether ``exc`` (an ``openai`` connection error) failed to connect at all, rather
    than timing out on an answer (the HTTP clients under ``openai`` name their connect
    errors ``ConnectError`` and ``ConnectTimeout``)."""
    if not isinstance(exc, openai.APIConnectionError):
        return False
    if not isinstance(exc, openai.APITimeoutError):
        return True
    cause = exc.__cause__ or exc.__context__
    return type(cause).__name__ in ("ConnectError", "ConnectTimeout")


def _error_fields(exc: openai.APIStatusError) -> tuple[str | None, str | None, str]:
    """(code, type, message) of a status error's JSON body, as far as it says."""
    body: Any = exc.body
    if isinstance(body, Mapping) and isinstance(body.get("error"), Mapping):
        body = body["error"]
    fields: Mapping[str, Any] = body if isinstance(body, Mapping) else {}
    code = fields.get("code") or getattr(exc, "code", None)
    kind = fields.get("type") or getattr(exc, "type", None)
    message = fields.get("message") or (body if isinstance(body, str) else "")
    message = " ".join(str(message).split())
    if len(message) > 200:
        message = message[:199] + "…"
    return (str(code) if code else None, str(kind) if kind else None, message)


def _headers(exc: openai.APIStatusError) -> Mapping[str, str]:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    return headers if headers is not None else {}


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def duration_s(text: str) -> float | None:
    """Seconds in a reset header's duration: ``"20"``, ``"1.5s"``, ``"250ms"``, ``"6m0s"``,
    ``"1h2m3s"``; None when it is none of these."""
    text = text.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(number) * _UNIT_S[unit] for number, unit in parts)


def _until_s(text: str, now: float) -> float | None:
    """Seconds until an HTTP date or an RFC 3339 timestamp; None when it is neither."""
    moment: datetime | None
    try:
        moment = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        try:
            moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
        except ValueError:
            return None
    if moment.tzinfo is None:
        return None
    return max(0.0, moment.timestamp() - now)


def retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds a reply's ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date)
    asks for; None when it has neither."""
    lowered = {key.lower(): value for key, value in headers.items()}
    if (ms := lowered.get("retry-after-ms")) is not None:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    if (after := lowered.get("retry-after")) is not None:
        seconds = duration_s(after)
        if seconds is None:
            seconds = _until_s(after, time.time() if now is None else now)
        return seconds
    return None


def requested_wait(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """How long the provider asks a caller to wait, from a reply's headers: ``retry-after-ms``,
    ``retry-after`` (seconds or an HTTP date), else the latest reset among the limits it
    says are used up (``x-ratelimit-reset-requests``/``-tokens`` as OpenAI and Groq send
    them, ``anthropic-ratelimit-*-reset`` timestamps), else the latest reset it gives. None
    when it says nothing."""
    now = time.time() if now is None else now
    asked = retry_after(headers, now)
    if asked is not None:
        return asked
    lowered = {key.lower(): value for key, value in headers.items()}
    resets: dict[str, float] = {}
    for key, value in lowered.items():
        if key.startswith("x-ratelimit-reset-"):
            seconds = duration_s(value)
        elif key.startswith("anthropic-ratelimit-") and key.endswith("-reset"):
            seconds = _until_s(value, now)
        else:
            continue
        if seconds is not None:
            resets[key.replace("-reset", "-remaining", 1)] = seconds
    if not resets:
        return None
    used_up = [s for key, s in resets.items() if lowered.get(key, "").strip() == "0"]
    return max(used_up or resets.values())


def provider_stop_in(exc: BaseException) -> ProviderStop | None:
    """The ``ProviderStop`` that ``exc`` is or was raised from (its causes and contexts),
    so a system that wrapped it in an error of its own still stops the job."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, ProviderStop):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


async def check_settings(call: Callable[[], Awaitable[Any]], *, name: str, where: str) -> None:
    """Send ``call`` (one cheap request) to see whether the provider takes a model's
    settings: a refusal (key, model, quota) raises ``ProviderRefused``, and so does an
    endpoint ``where`` that cannot be reached in three tries; any other answer, a rate
    limit or a fault of the provider's included, passes (``name``: the model, for the
    line)."""
    for attempt in range(1, 4):
        try:
            await call()
            return
        except openai.APIConnectionError as exc:
            if not cannot_connect(exc):
                return  # slow, not wrong
            if attempt == 3:
                detail = " ".join(str(exc.__cause__ or exc).split())[:160]
                raise ProviderRefused(
                    f"{name}: cannot reach {where} ({detail}): check the model's base_url"
                ) from exc
            await asyncio.sleep(0.25 * attempt)
        except Exception as exc:
            fault = classify(exc)
            if fault.kind == "refused":
                raise ProviderRefused(f"{name}: {fault.reason}") from exc
            return
