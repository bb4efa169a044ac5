"""How a model is named and configured, and how a configured LM is built.

A model string is ``<provider>/<name>``; the provider is a ``ProviderKind`` in
``LM_PROVIDERS`` (``core/plugins.py``): a built-in (``local``, ``openai``, ``python``,
``litellm``), an entry point of the ``emery.lm_providers`` group, or ``module:attr`` (a
module path holds no ``/``, so ``my_pkg.providers:ECHO/echo-1`` is the provider
``my_pkg.providers:ECHO`` given ``echo-1``; ``python/<module>:<attr>`` is unchanged, its
``:`` being after the ``/``). Any other prefix is a LiteLLM provider (``anthropic/...``).
"""

from __future__ import annotations

import inspect
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from emery.core.errors import ConfigError, EmeryError
from emery.core.imports import import_object
from emery.core.models import ChatMessage
from emery.core.plugins import PluginRegistry
from emery.core.settings import Settings
from emery.core.user_code import awaiting
from emery.lm.base import LM, Completion
from emery.lm.cache import CachedLM, ResponseCache
from emery.lm.catalog import installed_adapter, installed_path, split_adapter_name
from emery.lm.hub import gguf_path
from emery.lm.local import LocalLM
from emery.lm.tokens import TokenRecordingLM
from emery.lm.usage import MeteredLM, Price, UsageMeter
from emery.lm.wrapper import LMWrapper

DEFAULT_MODEL = "local/qwen2.5-coder-0.5b"


class LMConfig(Settings):
    """One model and how to call it.

    ``model`` is ``local/<name>`` (a known model), ``local/<name>+<job id>`` (a known model
    with the LoRA adapter that SFT job trained), ``local/<path>.gguf`` (any file),
    ``local/<owner>/<repo>/<file>.gguf`` (a file pulled from the Hugging Face Hub),
    ``openai/<model>`` (any OpenAI-compatible endpoint; set ``base_url`` for one that is
    not OpenAI's), ``python/<module>:<attr>`` (an LM object or a function returning one),
    any LiteLLM model string (``anthropic/...``, ``gemini/...``, ``ollama/...``, or
    ``litellm/<string>``; the ``litellm`` extra), or ``<provider>/<name>`` for a provider
    of your own (``<module>:<attr>/<name>`` or an ``emery.lm_providers`` entry point).
    """

    model: str = DEFAULT_MODEL
    base_url: str | None = None
    api_key: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    max_tokens: int = Field(default=512, gt=0)
    concurrency: int = Field(default=8, gt=0)
    timeout_s: float = Field(default=120.0, gt=0)
    max_attempts: int = Field(default=5, gt=0)
    """Attempts of a call that meets a passing fault (a 5xx, a timeout, a dropped
    connection); a rate-limit answer is waited out and uses none."""
    max_wait_s: float = Field(default=600.0, ge=0)
    """How long one call may wait on its provider's rate limit in all; past it the job
    pauses (resume it when the limit allows)."""
    requests_per_minute: float | None = Field(default=None, gt=0)
    """A client-side pace for a hosted model, shared by every role and rollout of this
    process that calls the same model: set it to the provider's limit to stay under it."""
    tokens_per_minute: float | None = Field(default=None, gt=0)
    """As ``requests_per_minute``, for tokens (prompt estimated before the call, plus
    ``max_tokens``; settled with the tokens used)."""
    n_ctx: int = Field(default=4096, gt=0)
    n_parallel: int = Field(default=4, gt=0, le=64)
    n_threads: int | None = Field(default=None, gt=0)
    prefix_reuse: bool = True
    cache: bool = True
    cache_sampled: bool = False
    record_tokens: bool = False
    """Record each call's token ids and log-probabilities on its span (for RL on agents):
    off by default, as they are several times the size of the text."""
    price_input_per_mtok: float | None = None
    price_output_per_mtok: float | None = None

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, not {value!r}")
        return value

    def has_price(self) -> bool:
        """Whether a call of this model costs anything: a stated or table price, or a price
        its provider knows (LiteLLM's list, for a LiteLLM model with the extra installed)."""
        price = self.price()
        if price.input_per_mtok or price.output_per_mtok:
            return True
        if not self.model.partition("/")[2]:
            return False  # no model at all: building it says what is wrong
        kind, name = model_provider(self.model)
        return kind.priced(self, name)

    def price(self) -> Price:
        table = Price.for_model(self.model)
        return Price(
            input_per_mtok=(
                table.input_per_mtok
                if self.price_input_per_mtok is None
                else self.price_input_per_mtok
            ),
            output_per_mtok=(
                table.output_per_mtok
                if self.price_output_per_mtok is None
                else self.price_output_per_mtok
            ),
        )


_local_models: dict[tuple[str, str, int, int, int | None, bool], LocalLM] = {}
_local_lock = threading.Lock()


def local_model_path(name: str) -> Path:
    """The file behind ``local/<name>``: a known model's verified file, a ``.gguf`` path, or
    a pulled Hub model's verified file (``<owner>/<repo>/<file>.gguf``, when no such path)."""
    if name.endswith(".gguf"):
        return gguf_path(name)
    if split_adapter_name(name)[1] is not None:
        return installed_adapter(name)[0]
    return installed_path(name)


def local_adapter_path(name: str) -> Path | None:
    """The GGUF LoRA adapter of ``local/<model>+<job id>``; None for a plain model."""
    if name.endswith(".gguf") or split_adapter_name(name)[1] is None:
        return None
    return installed_adapter(name)[1]


def _unpriced(config: LMConfig, name: str) -> bool:
    return False


@dataclass(frozen=True)
class ProviderKind:
    """A model provider, named by the model string's ``<provider>/`` prefix.

    ``build(config, name)`` makes the bare LM (``name``: the model string after the
    prefix); ``priced(config, name)`` says whether the provider itself prices a call (as a
    ``Completion.cost_usd``) when the config states no price: a ``lm_cost_usd`` budget
    needs a priced model.
    """

    name: str
    build: Callable[[LMConfig, str], LM]
    priced: Callable[[LMConfig, str], bool] = _unpriced


def _local_lm(config: LMConfig, name: str) -> LM:
    """``local/<name>``: one shared instance per file, adapter and decoding settings."""
    path = local_model_path(name)
    lora = local_adapter_path(name)
    key = (
        str(path.resolve()),
        str(lora.resolve()) if lora is not None else "",
        config.n_ctx,
        config.n_parallel,
        config.n_threads,
        config.prefix_reuse,
    )
    with _local_lock:
        if key not in _local_models:
            _local_models[key] = local_lm(config)
        return _local_models[key]


def local_lm(config: LMConfig, *, lora: Path | None = None, seed: int = 0) -> LocalLM:
    """A new, unshared ``LocalLM`` of ``config``'s ``local/<name>`` with ``lora`` applied
    (default: the name's own adapter), its sampling seeded by ``seed`` (``build_base_lm``
    shares one per file instead)."""
    name = config.model.removeprefix("local/")
    return LocalLM(
        local_model_path(name),
        model=config.model,
        n_ctx=config.n_ctx,
        n_parallel=config.n_parallel,
        n_threads=config.n_threads,
        prefix_reuse=config.prefix_reuse,
        seed=seed,
        lora_path=lora if lora is not None else local_adapter_path(name),
    )


def _openai_lm(config: LMConfig, name: str) -> LM:
    from emery.lm.openai_compat import OpenAICompatibleLM  # openai is slow to import

    return OpenAICompatibleLM(
        name, api_key=config.api_key, api_key_env=config.api_key_env, **_hosted(config)
    )


def _litellm_priced(config: LMConfig, name: str) -> bool:
    from emery.lm.litellm_lm import litellm_has_price  # imports LiteLLM: only here

    return litellm_has_price(name)


LOCAL = ProviderKind("local", _local_lm)
OPENAI = ProviderKind("openai", _openai_lm)
PYTHON = ProviderKind("python", lambda config, name: _python_lm(name))
LITELLM = ProviderKind(
    "litellm", lambda config, name: _litellm_model(config, name), priced=_litellm_priced
)
"""``litellm/<LiteLLM string>``, and every prefix no other provider has (``anthropic/...``),
given the whole model string."""

_BUILT_IN = (LOCAL, OPENAI, PYTHON, LITELLM)

LM_PROVIDERS = PluginRegistry(
    what="model provider",
    plural="model providers",
    where="model",
    builtins={kind.name: f"{__name__}:{kind.name.upper()}" for kind in _BUILT_IN},
    attribute="PROVIDER",
    group="emery.lm_providers",
    type=ProviderKind,
)


MODEL_SHAPE = (
    "must look like local/<name>, local/<file.gguf>, openai/<model>, python/<module>:<attr>"
    " or <provider>/<model>"
)
"""What a model string is, said by every error about its shape."""


def model_provider(model: str) -> tuple[ProviderKind, str]:
    """The provider of the model string ``model`` and the name it is given: a registered
    provider gets what follows its prefix, LiteLLM (any other prefix) the whole string."""
    prefix, _, name = model.partition("/")
    if not name:
        raise ConfigError(f"model {model!r} {MODEL_SHAPE}")
    if prefix in LM_PROVIDERS.builtins or ":" in prefix or prefix in LM_PROVIDERS.names():
        return replace(LM_PROVIDERS, where=f"model {model!r}").get(prefix), name
    return LITELLM, model


def build_base_lm(config: LMConfig) -> LM:
    """The bare model named by ``config``; one shared instance per local file."""
    kind, name = model_provider(config.model)
    if any(kind is built_in for built_in in _BUILT_IN):
        return kind.build(config, name)
    return _plugin_lm(kind, config, name)


def _plugin_lm(kind: ProviderKind, config: LMConfig, name: str) -> LM:
    """The LM a provider of your own builds, run as user code (``UserCodeLM``); a build
    that fails or gives no LM is a one-line ``ConfigError``."""
    where = f"model {config.model!r}"
    try:
        lm = kind.build(config, name)
    except EmeryError as exc:
        raise type(exc)(f"{where}: {exc}") from None
    except Exception as exc:
        raise ConfigError(
            f"{where}: provider {kind.name!r} failed to build it ({type(exc).__name__}: {exc})"
        ) from None
    if not isinstance(lm, LM) or not inspect.iscoroutinefunction(lm.complete):
        raise ConfigError(
            f"{where}: provider {kind.name!r} gave a {type(lm).__name__}, not an LM"
            " (needs .model and async .complete)"
        )
    return UserCodeLM(lm, f"model {config.model}")


def _litellm_model(config: LMConfig, name: str) -> LM:
    """A model of any provider LiteLLM knows (``anthropic/...``, ``gemini/...``,
    ``litellm/<any LiteLLM string>``), with the ``litellm`` extra installed."""
    provider = name.partition("/")[0]
    from emery.lm.litellm_lm import LiteLLMModel, load_litellm

    try:
        litellm = load_litellm()
    except ConfigError:
        raise ConfigError(
            f"model {config.model!r}: {provider!r} is none of the model providers"
            f" {_known_providers()}; other providers (anthropic/, gemini/, ollama/, ...)"
            " need LiteLLM: pip install 'emery[litellm]'"
        ) from None
    if provider not in litellm.provider_list:
        raise ConfigError(
            f"unknown model provider {provider!r} in {config.model!r}; known model providers:"
            f" {_known_providers()}, or a LiteLLM provider (anthropic, gemini, ollama, groq,"
            " bedrock, ...)"
        )
    named_env = "api_key_env" in config.model_fields_set  # else LiteLLM's own variable
    api_key = config.api_key or (os.environ.get(config.api_key_env) if named_env else None)
    return LiteLLMModel(name, api_key=api_key, **_hosted(config))


def _known_providers() -> str:
    return f"{', '.join(LM_PROVIDERS.names())} (or name one as '<module>:<attr>/<model>')"


def _hosted(config: LMConfig) -> dict[str, Any]:
    """What every hosted model takes from its config: endpoint, concurrency, timeout, how it
    retries and waits, and its client-side per-minute limits."""
    from emery.lm.retry import RetryPolicy

    return {
        "base_url": config.base_url,
        "concurrency": config.concurrency,
        "timeout_s": config.timeout_s,
        "retry": RetryPolicy(max_attempts=config.max_attempts, max_wait_s=config.max_wait_s),
        "requests_per_minute": config.requests_per_minute,
        "tokens_per_minute": config.tokens_per_minute,
    }


def _python_lm(ref: str) -> LM:
    """The LM that ``python/<ref>`` names: an LM object, or a function returning one
    (called with no arguments); anything else is a ConfigError, never a traceback."""
    obj = import_object(ref)
    if not isinstance(obj, LM) and callable(obj):
        try:
            obj = obj()
        except Exception as exc:
            raise ConfigError(
                f"python/{ref} is not an LM, and calling it with no arguments failed"
                f" ({type(exc).__name__}: {exc})"
            ) from None
    if not isinstance(obj, LM) or not inspect.iscoroutinefunction(obj.complete):
        raise ConfigError(f"python/{ref} is not an LM (needs .model and async .complete)")
    return PythonLM(obj, ref)


class UserCodeLM(LMWrapper):
    """A model of user code in the job's process (a ``python/`` model, a plug-in
    provider's), so its ``sys.exit`` is an error of the call (``UserCodeExited``), never the
    end of the job; ``who`` names it in that error."""

    def __init__(self, inner: LM, who: str) -> None:
        super().__init__(inner)
        self.who = who

    async def _call(self, messages: Sequence[ChatMessage], params: dict[str, Any]) -> Completion:
        return await awaiting(self.who, self.inner.complete(messages, **params))


class PythonLM(UserCodeLM):
    """A ``python/<ref>`` model."""

    def __init__(self, inner: LM, ref: str) -> None:
        super().__init__(inner, f"model python/{ref}")
        self.ref = ref


def build_lm(
    config: LMConfig,
    *,
    role: str,
    meter: UsageMeter,
    cache: ResponseCache | None,
    base: LM | None = None,
) -> MeteredLM:
    """A model for one role: cached (when enabled), asked for its tokens (when
    ``record_tokens``) and metered, with the role's defaults."""
    lm: LM = base if base is not None else build_base_lm(config)
    if cache is not None and config.cache:
        lm = CachedLM(lm, cache, cache_sampled=config.cache_sampled)
    if config.record_tokens:  # outside the cache: a call with tokens has a key of its own
        lm = TokenRecordingLM(lm)
    return MeteredLM(
        lm,
        meter,
        role,
        price=config.price(),
        temperature=config.temperature,
        max_tokens=config.max_tokens,
    )
