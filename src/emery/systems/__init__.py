"""Systems: what is optimized. Each has named text components and runs one example."""

from __future__ import annotations

from typing import TYPE_CHECKING

from emery.core.lazy import lazy_exports

if TYPE_CHECKING:
    from emery.systems.base import ComponentCall, RunContext, System, SystemRun
    from emery.systems.parsers import ParseError, ParserConfig
    from emery.systems.prompt_program import (
        MessageTemplate,
        PromptProgram,
        PromptProgramConfig,
        StageConfig,
    )
    from emery.systems.templates import placeholders, render

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "ComponentCall": "emery.systems.base",
        "RunContext": "emery.systems.base",
        "System": "emery.systems.base",
        "SystemRun": "emery.systems.base",
        "ParseError": "emery.systems.parsers",
        "ParserConfig": "emery.systems.parsers",
        "MessageTemplate": "emery.systems.prompt_program",
        "PromptProgram": "emery.systems.prompt_program",
        "PromptProgramConfig": "emery.systems.prompt_program",
        "StageConfig": "emery.systems.prompt_program",
        "placeholders": "emery.systems.templates",
        "render": "emery.systems.templates",
    },
)

__all__ = [
    "ComponentCall",
    "MessageTemplate",
    "ParseError",
    "ParserConfig",
    "PromptProgram",
    "PromptProgramConfig",
    "RunContext",
    "StageConfig",
    "System",
    "SystemRun",
    "placeholders",
    "render",
]
