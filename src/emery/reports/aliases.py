"""Aliases of a published prompt (``production``, ``staging``): a name for one version, or
for a split of traffic between versions (``3=90 4=10``).

Each setting of an alias is the next version of the store resource
``prompt-alias:NAME:ALIAS`` (kind ``prompt-alias``), so its history is kept as the prompt's
is. A split picks a version per request: by the request's split key when it gives one (the
same key always gets the same version, so a user stays on one version), else at random, in
proportion to the weights.

An alias may also name a shadow version, run on a copy of each request it serves with its
output never answered, and a scorer, a published verifier graph (``NAME:VERSION``) that
scores every run of the alias and of its shadow (``reports.shadow``), so a candidate is
compared with what serves on the same live requests before it takes any traffic.
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
    shadow: int | None = None
    """A version run beside each request, its output not answered (module doc)."""
    scorer: str | None = None
    """``NAME:VERSION`` of a published verifier graph that scores the alias's runs."""

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
        """``3``, ``3=90% 4=10%``, then the shadow and the scorer when set."""
        total = sum(self.weights.values())
        parts = [
            str(next(iter(self.weights)))
            if len(self.weights) == 1
            else " ".join(f"{v}={w / total:.0%}" for v, w in sorted(self.weights.items()))
        ]
        if self.shadow is not None:
            parts.append(f"shadow {self.shadow}")
        if self.scorer is not None:
            parts.append(f"scored by {self.scorer}")
        return ", ".join(parts)


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


def set_alias(
    store: Store,
    name: str,
    alias: str,
    weights: Mapping[int, float],
    *,
    shadow: int | None = None,
    scorer: str | None = None,
) -> AliasTarget:
    """Point ``alias`` of ``name`` at ``weights``' versions (each must exist), with a
    ``shadow`` version and a ``scorer`` (``NAME:VERSION``) when given."""
    check_alias(alias)
    for version in weights:
        published.show(store, name, version)  # NotFound names what exists
    content: dict[str, object] = {"weights": {str(v): w for v, w in weights.items()}}
    if shadow is not None:
        if shadow in weights:
            raise ConfigError(f"version {shadow} serves the alias's traffic: it cannot shadow it")
        published.show(store, name, shadow)
        content["shadow"] = shadow
    if scorer is not None:
        scorer_name, scorer_version = parse_scorer(scorer)
        published.show(store, scorer_name, scorer_version)
        content["scorer"] = f"{scorer_name}:{scorer_version}"
    record = store.put_resource(_resource(name, alias), content, kind=ALIAS_KIND)
    return _target(name, alias, record.content, record.version)


def parse_scorer(text: str) -> tuple[str, int]:
    """``NAME:VERSION`` (a published verifier graph) as (name, version)."""
    scorer_name, _, version_text = text.rpartition(":")
    if not scorer_name or not version_text.isdigit() or int(version_text) < 1:
        raise ConfigError(f"scorer {text!r}: a published verifier graph as NAME:VERSION")
    return published.check_name(scorer_name), int(version_text)


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
    shadow, scorer = content.get("shadow"), content.get("scorer")
    return AliasTarget(
        name=name,
        alias=alias,
        weights=weights,
        version=version,
        shadow=shadow if isinstance(shadow, int) else None,
        scorer=scorer if isinstance(scorer, str) else None,
    )
