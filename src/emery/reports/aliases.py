"""Aliases of a published prompt (``production``, ``staging``): a name for one version, or
for a split of traffic between versions (``3=90 4=10``).

Each setting of an alias is the next version of the store resource
``prompt-alias:NAME:ALIAS`` (kind ``prompt-alias``), so its history is kept as the prompt's
is. A split picks a version per request: by the request's split key when it gives one (the
same key always gets the same version, so a user stays on one version), else at random, in
proportion to the weights.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Mapping

from pydantic import BaseModel, Field

from emery.core.errors import ConfigError
from emery.reports import published
from emery.reports.published import PublishedPrompt
from emery.store.protocol import Store
from emery.store.states import NotFound

ALIAS_KIND = "prompt-alias"
ALIAS_PATTERN = re.compile(r"[a-z][a-z0-9_-]{0,39}")


class AliasTarget(BaseModel):
    """Where an alias points: versions with their weights (one version: weight 100)."""

    name: str
    alias: str
    weights: dict[int, float] = Field(description="version -> share of the traffic")
    version: int = 0
    """The alias resource's own version: how many times the alias was set."""

    def pick(self, key: str | None = None) -> int:
        """The version one request runs: by ``key``'s hash when given, else at random."""
        versions = sorted(self.weights)
        if len(versions) == 1:
            return versions[0]
        total = sum(self.weights.values())
        if key is None:
            point = random.random() * total
        else:
            digest = hashlib.sha256(f"{self.name}:{self.alias}:{key}".encode()).digest()
            point = int.from_bytes(digest[:8], "big") / 2**64 * total
        for version in versions:
            point -= self.weights[version]
            if point < 0:
                return version
        return versions[-1]

    def describe(self) -> str:
        """``3`` or ``3=90% 4=10%``."""
        if len(self.weights) == 1:
            return str(next(iter(self.weights)))
        total = sum(self.weights.values())
        return " ".join(f"{v}={w / total:.0%}" for v, w in sorted(self.weights.items()))


def check_alias(alias: str) -> str:
    """``alias`` if it can name an alias (lowercase letters, digits, ``_`` and ``-``)."""
    if not ALIAS_PATTERN.fullmatch(alias):
        raise ConfigError(
            f"alias {alias!r}: lowercase letters, digits, '_' and '-', starting with a letter"
        )
    return alias


def parse_weights(specs: list[str]) -> dict[int, float]:
    """``["3"]`` or ``["3=90", "4=10"]`` as version -> weight."""
    if not specs:
        raise ConfigError("name a version (3) or a split of versions (3=90 4=10)")
    weights: dict[int, float] = {}
    for spec in specs:
        version_text, _, weight_text = spec.partition("=")
        try:
            version = int(version_text)
            weight = float(weight_text) if weight_text else 100.0
        except ValueError:
            raise ConfigError(f"{spec!r}: a version (3) or version=weight (3=90)") from None
        if weight <= 0 or weight != weight or weight == float("inf"):
            raise ConfigError(f"{spec!r}: a weight is a positive number")
        if version in weights:
            raise ConfigError(f"version {version} is named twice")
        weights[version] = weight
    if len(specs) == 1 and "=" in specs[0]:
        raise ConfigError("a split names two versions or more (3=90 4=10); one version: 3")
    return weights


def set_alias(store: Store, name: str, alias: str, weights: Mapping[int, float]) -> AliasTarget:
    """Point ``alias`` of ``name`` at ``weights``' versions (each must exist)."""
    check_alias(alias)
    for version in weights:
        published.show(store, name, version)  # NotFound names what exists
    content = {"weights": {str(v): w for v, w in weights.items()}}
    record = store.put_resource(_resource(name, alias), content, kind=ALIAS_KIND)
    return _target(name, alias, record.content, record.version)


def get_alias(store: Store, name: str, alias: str) -> AliasTarget:
    """Where ``alias`` of ``name`` points now."""
    check_alias(alias)
    published.check_name(name)
    try:
        record = store.get_resource(_resource(name, alias))
    except NotFound:
        raise NotFound(
            f"prompt {name!r} has no alias {alias!r} (emery prompts alias {name} {alias} VERSION)"
        ) from None
    return _target(name, alias, record.content, record.version)


def resolve(
    store: Store,
    name: str,
    *,
    version: int | None = None,
    alias: str | None = None,
    key: str | None = None,
) -> PublishedPrompt:
    """The version a request for ``name`` runs: ``version``, else the one ``alias`` picks
    (for ``key``), else the latest."""
    if version is not None and alias is not None:
        raise ConfigError("give a version or an alias, not both")
    if alias is not None:
        version = get_alias(store, name, alias).pick(key)
    return published.show(store, name, version)


def _resource(name: str, alias: str) -> str:
    return f"{ALIAS_KIND}:{published.check_name(name)}:{alias}"


def _target(name: str, alias: str, content: dict[str, object], version: int) -> AliasTarget:
    raw = content.get("weights")
    weights = {int(v): float(w) for v, w in raw.items()} if isinstance(raw, dict) else {}
    return AliasTarget(name=name, alias=alias, weights=weights, version=version)
