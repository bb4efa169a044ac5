"""Verifier settings are one model per kind, looked up like every plug-in (a built-in name,
``module:attr`` or an ``emery.verifiers`` entry point)."""

from __future__ import annotations

from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest

from emery.config.loading import parse_config
from emery.core import plugins
from emery.core.errors import ConfigError
from emery.core.models import Example
from emery.lm.base import LM
from emery.sdk.arguments import optimize_config
from emery.verifiers.base import Verdict
from emery.verifiers.config import VerifierConfig, VerifierKind, build_verifier
from emery.verifiers.kinds import NumericConfig, RegexConfig


class PrefixConfig(VerifierConfig):
    """A plug-in kind's settings: the output must start with ``prefix``."""

    kind: str = "prefix"
    prefix: str = ">"


class Prefix:
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    async def verify(self, example: Example, output: Any, trace: Any = None) -> Verdict:
        return Verdict(score=float(str(output).startswith(self.prefix)))


def _build(config: PrefixConfig, judge: LM | None) -> Prefix:
    return Prefix(config.prefix)


PREFIX = VerifierKind(name="prefix", config=PrefixConfig, build=_build)


def verifier_of(table: dict[str, Any]) -> VerifierConfig:
    config = parse_config({"dataset": {"task": "word_problems"}, "verifier": table})
    assert config.verifier is not None
    return config.verifier


def test_each_kind_reads_only_its_own_keys() -> None:
    assert verifier_of({"kind": "numeric", "abs_tol": 0.5}) == NumericConfig(abs_tol=0.5)
    with pytest.raises(ConfigError, match=r"^config: unknown key 'verifier.abs_tol'"):
        verifier_of({"kind": "exact", "abs_tol": 0.5})
    with pytest.raises(ConfigError, match=r"^config: unknown key 'verifier.pattern'"):
        verifier_of({"kind": "numeric", "pattern": "x"})


def test_a_kinds_required_key_is_checked_with_the_config() -> None:
    with pytest.raises(ConfigError, match=r"^config: missing required key 'verifier.pattern'"):
        verifier_of({"kind": "regex"})
    with pytest.raises(ConfigError, match=r"^config: missing required key 'verifier.function'"):
        verifier_of({"kind": "python"})


def test_the_base_constructor_gives_the_kinds_model() -> None:
    assert VerifierConfig(kind="regex", pattern="a+") == RegexConfig(pattern="a+")
    assert type(VerifierConfig.model_validate({"kind": "numeric"})) is NumericConfig
    assert VerifierConfig().kind == "exact"


def test_a_stored_config_keeps_the_kinds_settings() -> None:
    config = parse_config({"dataset": {"task": "word_problems"}, "verifier": {"kind": "numeric"}})
    again = parse_config(config.model_dump(mode="json"))
    assert again.verifier == NumericConfig()
    assert config.model_dump(mode="json")["verifier"]["abs_tol"] == 1e-6


async def test_a_plug_in_kind_by_module_attr() -> None:
    config = verifier_of({"kind": "test_verifier_kinds:PREFIX", "prefix": "A:"})
    assert isinstance(config, PrefixConfig)
    verifier = build_verifier(config)
    example = Example(id="e", input={})
    assert (await verifier.verify(example, "A: yes")).score == 1.0
    assert (await verifier.verify(example, "no")).score == 0.0
    with pytest.raises(ConfigError, match=r"^config: unknown key 'verifier.prefx'"):
        verifier_of({"kind": "test_verifier_kinds:PREFIX", "prefx": "A:"})


def test_a_plug_in_kind_by_entry_point(monkeypatch: pytest.MonkeyPatch) -> None:
    entry = EntryPoint(name="prefix", value="test_verifier_kinds:PREFIX", group="emery.verifiers")
    monkeypatch.setattr(plugins, "entry_points", lambda group: [entry] * (group == entry.group))
    config = verifier_of({"kind": "prefix"})
    assert isinstance(config, PrefixConfig)
    assert config.scope_settings() == {"kind": "prefix", "prefix": ">"}


def test_an_unknown_kind_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError) as info:
        verifier_of({"kind": "judge"})
    assert str(info.value).startswith("config: verifier.kind: unknown kind 'judge'; known kinds:")
    assert "numeric" in str(info.value)
    assert "\n" not in str(info.value)


def test_the_sdk_writes_down_a_kinds_settings(tmp_path: Path) -> None:
    config, data, _ = optimize_config(
        system=None,
        dataset="word_problems",
        algorithm="baseline",
        budget=None,
        verifier=VerifierConfig(kind="numeric", rel_tol=0.1),
        lm="python/jobs_support:task_lm",
        reflection_lm=None,
        seed=0,
        settings=None,
        runtime=None,
        name=None,
        workdir=tmp_path,
    )
    assert data["verifier"] == {"kind": "numeric", "rel_tol": 0.1}
    assert config.verifier == NumericConfig(rel_tol=0.1)
