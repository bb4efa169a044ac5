"""Model specs: how ``local/``, ``openai/`` and ``python/`` strings become LMs."""

from __future__ import annotations

from pathlib import Path

import fake_models
import pytest

from emery.core.errors import ConfigError
from emery.lm import LMConfig, LocalLM, OpenAICompatibleLM, build_base_lm
from emery.lm.config import PythonLM


@pytest.mark.parametrize("spec", ["nope", "local", "local/", "openai/", ""])
def test_malformed_spec_is_a_config_error(spec: str) -> None:
    with pytest.raises(ConfigError, match="must look like"):
        build_base_lm(LMConfig(model=spec))


def test_unknown_provider_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="unknown model provider 'nosuch'"):
        build_base_lm(LMConfig(model="nosuch/gpt"))


def test_python_spec_loads_an_lm_object() -> None:
    lm = build_base_lm(LMConfig(model="python/fake_models:ECHO_LM"))
    assert isinstance(lm, PythonLM)  # its sys.exit is an error of the call
    assert lm.inner is fake_models.ECHO_LM
    assert lm.model == "fake/echo"


async def test_python_spec_calls_a_factory() -> None:
    lm = build_base_lm(LMConfig(model="python/fake_models:make_echo_lm"))
    assert lm.model == "fake/echo-factory"
    assert (await lm.complete([{"role": "user", "content": "hi"}])).text == "hi"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("python/fake_models:NOT_AN_LM", "is not an LM"),
        ("python/fake_models:no_such_attr", "has no attribute"),
        ("python/emery_no_such_module_xyz:lm", "cannot import module"),
        ("python/fake_models", "module:attribute"),
    ],
)
def test_bad_python_spec_is_a_config_error(spec: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        build_base_lm(LMConfig(model=spec))


def test_unknown_local_model_is_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EMERY_MODEL_DIR", str(tmp_path))
    with pytest.raises(ConfigError, match="unknown local model 'nope'"):
        build_base_lm(LMConfig(model="local/nope"))


def test_missing_gguf_is_a_config_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"missing\.gguf"):
        build_base_lm(LMConfig(model="local/missing.gguf"))


def test_local_gguf_path_gives_one_shared_instance(tmp_path: Path) -> None:
    path = tmp_path / "weights.gguf"
    path.write_bytes(b"GGUF")
    config = LMConfig(model=f"local/{path}", n_ctx=1024, prefix_reuse=False)
    lm = build_base_lm(config)
    assert isinstance(lm, LocalLM)
    assert lm.path == path
    assert lm.n_ctx == 1024
    assert lm.prefix_reuse is False
    assert lm.model == f"local/{path}"
    assert build_base_lm(config) is lm
    assert build_base_lm(config.model_copy(update={"n_ctx": 2048})) is not lm


def test_openai_spec_builds_a_client(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    lm = build_base_lm(
        LMConfig(model="openai/gpt-4o-mini", base_url="http://127.0.0.1:9/v1", max_attempts=2)
    )
    assert isinstance(lm, OpenAICompatibleLM)
    assert lm.model == "gpt-4o-mini"
    assert lm.base_url == "http://127.0.0.1:9/v1"
    assert lm.retry.max_attempts == 2
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        build_base_lm(LMConfig(model="openai/gpt-4o-mini"))


def test_lm_config_rejects_unknown_keys_and_bad_values() -> None:
    with pytest.raises(ValueError, match="extra"):
        LMConfig.model_validate({"modle": "x"})
    with pytest.raises(ValueError, match="temperature"):
        LMConfig(temperature=3.0)
