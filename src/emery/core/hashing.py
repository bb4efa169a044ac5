"""Stable content hashes of JSON-able values."""

import hashlib
import json
from typing import Any


def canonical_json(value: Any) -> str:
    """``value`` as JSON with sorted keys and no whitespace, so equal values hash equal."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def content_hash(value: Any, length: int = 16) -> str:
    """A hex sha256 prefix of the canonical JSON of ``value``."""
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()[:length]


def call_seed(*parts: Any) -> int:
    """A sampling seed (0 to 2**31 - 1) that is a pure function of ``parts``."""
    return int(content_hash(list(parts), 8), 16) % 2**31
