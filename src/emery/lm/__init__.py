"""Language models: the LM protocol, local llama.cpp and OpenAI-compatible clients, cache, usage."""

from emery.lm.base import LM, Completion, LMError, TokenUsage, complete_sync
from emery.lm.cache import CachedLM, ResponseCache
from emery.lm.config import LMConfig, build_base_lm, build_lm
from emery.lm.fake import FakeLM
from emery.lm.local import LocalLM
from emery.lm.openai_compat import OpenAICompatibleLM
from emery.lm.usage import MeteredLM, Price, RoleUsage, UsageMeter

__all__ = [
    "LM",
    "CachedLM",
    "Completion",
    "FakeLM",
    "LMConfig",
    "LMError",
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
