"""A model provider is a plug-in (``lm/config.py:LM_PROVIDERS``): the model string's
``<provider>/`` prefix names a ``ProviderKind``, a built-in, an ``emery.lm_providers``
entry point or ``module:attr`` (``<module>:<attr>/<name>``); any other prefix is LiteLLM's,
as before; a provider that cannot be used is one line."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib.metadata import EntryPoint
from typing import Any, cast

import pytest

from emery.core import plugins
from emery.core.errors import ConfigError
from emery.core.models import ChatMessage
from emery.core.user_code import UserCodeExited
from emery.lm import FakeLM, LMConfig, OpenAICompatibleLM, build_base_lm, build_lm
from emery.lm.config import (
    LITELLM,
    LM_PROVIDERS,
    LOCAL,
    OPENAI,
    PYTHON,
    ProviderKind,
    UserCodeLM,
    model_provider,
)
from emery.lm.usage import UsageMeter

BUILT: list[tuple[str, float]] = []


def _shouting_lm(config: LMConfig, name: str) -> FakeLM:
    """An LM that shouts the last message back, as ``<name>`` (records what it was given)."""
    BUILT.append((name, config.temperature))
    return FakeLM(lambda messages: messages[-1]["content"].upper(), model=f"shout/{name}")


SHOUT = ProviderKind("shout", _shouting_lm)
PRICED = ProviderKind("priced", _shouting_lm, priced=lambda config, name: name == "paid")


class _Exits:
    model = "exits"

    async def complete(self, messages: Sequence[ChatMessage], **params: Any) -> Any:
        sys.exit(3)


EXITS = ProviderKind("exits", lambda config, name: _Exits())


def _breaks(config: LMConfig, name: str) -> Any:
    return {"present": 1}["missing"]


BREAKS = ProviderKind("breaks", _breaks)
NOT_AN_LM = ProviderKind("not_an_lm", lambda config, name: cast(Any, "text"))


def _lm(model: str, **settings: Any) -> Any:
    return build_lm(LMConfig(model=model, **settings), role="task", meter=UsageMeter(), cache=None)


@pytest.mark.parametrize(
    ("model", "kind", "name"),
    [
        ("local/qwen2.5-coder-0.5b", LOCAL, "qwen2.5-coder-0.5b"),
        ("openai/gpt-4o-mini", OPENAI, "gpt-4o-mini"),
        ("python/fake_models:ECHO_LM", PYTHON, "fake_models:ECHO_LM"),
        ("litellm/anthropic/claude", LITELLM, "anthropic/claude"),
        ("anthropic/claude", LITELLM, "anthropic/claude"),  # any other prefix: the whole string
    ],
)
def test_a_built_in_provider_still_resolves(model: str, kind: ProviderKind, name: str) -> None:
    assert model_provider(model) == (kind, name)
    assert LM_PROVIDERS.get(kind.name) is kind


def test_a_built_in_provider_builds_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    lm = build_base_lm(LMConfig(model="openai/gpt-4o-mini", base_url="http://127.0.0.1:9/v1"))
    assert isinstance(lm, OpenAICompatibleLM)
    assert lm.model == "gpt-4o-mini"


async def test_a_module_attr_provider_is_used_end_to_end() -> None:
    BUILT.clear()
    lm = _lm(f"{__name__}:SHOUT/loud-1", temperature=0.5)
    completion = await lm.complete([{"role": "user", "content": "hello there"}])
    assert completion.text == "HELLO THERE"
    assert lm.model == "shout/loud-1"
    assert BUILT == [("loud-1", 0.5)]  # given the name after the prefix and the config
    assert lm.meter.total().calls == 1
    assert isinstance(build_base_lm(LMConfig(model=f"{__name__}:SHOUT/x")), UserCodeLM)


async def test_an_entry_point_provider_is_found_by_its_short_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    entry = EntryPoint(name="shout", value=f"{__name__}:SHOUT", group="emery.lm_providers")
    monkeypatch.setattr(
        plugins, "entry_points", lambda group: [entry] if group == entry.group else []
    )
    assert "shout" in LM_PROVIDERS.names()
    completion = await _lm("shout/loud-2").complete([{"role": "user", "content": "hi"}])
    assert completion.text == "HI"


def test_a_provider_says_whether_its_calls_are_priced() -> None:
    assert LMConfig(model=f"{__name__}:PRICED/paid").has_price()
    assert not LMConfig(model=f"{__name__}:PRICED/free").has_price()
    assert not LMConfig(model="python/fake_models:ECHO_LM").has_price()


async def test_a_plug_in_models_sys_exit_is_an_error_of_the_call() -> None:
    lm = build_base_lm(LMConfig(model=f"{__name__}:EXITS/x"))
    with pytest.raises(UserCodeExited, match=rf"model {__name__}:EXITS/x called sys.exit\(3\)"):
        await lm.complete([{"role": "user", "content": "hi"}])


def _one_line(model: str) -> str:
    with pytest.raises(ConfigError) as info:
        build_base_lm(LMConfig(model=model))
    message = str(info.value)
    assert "\n" not in message
    return message


def test_an_unknown_provider_is_one_line_listing_the_known_ones() -> None:
    message = _one_line("nosuch/gpt")
    assert message.startswith("unknown model provider 'nosuch' in 'nosuch/gpt'")
    assert "known model providers: litellm, local, openai, python" in message


def test_an_unknown_provider_without_litellm_lists_the_known_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "litellm", None)
    message = _one_line("nosuch/gpt")
    assert "none of the model providers litellm, local, openai, python" in message
    assert "pip install 'emery[litellm]'" in message


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        (f"{__name__}:NOPE/x", f"model '{__name__}:NOPE/x': module '{__name__}' has no attribute"),
        ("no_such_module_x:P/x", "model 'no_such_module_x:P/x': cannot import module"),
        (f"{__name__}:_shouting_lm/x", "is a function; expected ProviderKind"),
        (f"{__name__}:BREAKS/x", "provider 'breaks' failed to build it (KeyError: 'missing')"),
        (f"{__name__}:NOT_AN_LM/x", "provider 'not_an_lm' gave a str, not an LM"),
        (f"{__name__}:SHOUT", "must look like"),
    ],
)
def test_a_bad_plug_in_provider_is_one_line(model: str, expected: str) -> None:
    assert expected in _one_line(model)


def test_the_plug_in_surface_exports_the_provider_kind() -> None:
    from emery import plugin

    assert (plugin.ProviderKind, plugin.LMConfig) == (ProviderKind, LMConfig)
