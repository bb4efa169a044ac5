"""Language models: the LM protocol, local llama.cpp and OpenAI-compatible clients, cache, usage."""

from __future__ import annotations

from typing import TYPE_CHECKING

from emery.core.lazy import lazy_exports

if TYPE_CHECKING:
    from emery.lm.base import LM, Completion, LMError, TokenUsage, complete_sync
    from emery.lm.cache import CachedLM, ResponseCache
    from emery.lm.config import LMConfig, build_base_lm, build_lm
    from emery.lm.fake import FakeLM
    from emery.lm.local import LocalLM
    from emery.lm.openai_compat import OpenAICompatibleLM
    from emery.lm.usage import MeteredLM, Price, RoleUsage, UsageMeter
    from emery.lm.wrapper import LMWrapper

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "LM": "emery.lm.base",
        "Completion": "emery.lm.base",
        "LMError": "emery.lm.base",
        "TokenUsage": "emery.lm.base",
        "complete_sync": "emery.lm.base",
        "CachedLM": "emery.lm.cache",
        "ResponseCache": "emery.lm.cache",
        "LMConfig": "emery.lm.config",
        "build_base_lm": "emery.lm.config",
        "build_lm": "emery.lm.config",
        "FakeLM": "emery.lm.fake",
        "LocalLM": "emery.lm.local",
        "OpenAICompatibleLM": "emery.lm.openai_compat",
        "MeteredLM": "emery.lm.usage",
        "Price": "emery.lm.usage",
        "RoleUsage": "emery.lm.usage",
        "UsageMeter": "emery.lm.usage",
        "LMWrapper": "emery.lm.wrapper",
    },
)

__all__ = [
    "LM",
    "CachedLM",
    "Completion",
    "FakeLM",
    "LMConfig",
    "LMError",
    "LMWrapper",
    "LocalLM",
    "MeteredLM",
    "OpenAICompatibleLM",
    "Price",
    "ResponseCache",
    "RoleUsage",
    "TokenUsage",
    "UsageMeter",
    "build_base_lm",
    "build_lm",
    "complete_sync",
]
