"""Systems: what is optimized. Each has named text components and runs one example."""

from __future__ import annotations

from typing import TYPE_CHECKING

from emery.core.lazy import lazy_exports

if TYPE_CHECKING:
    from emery.systems.base import ComponentCall, RunContext, System, SystemRun
    from emery.systems.capabilities import (
        MutatesStructure,
        ProposesCode,
        StagedPrompts,
        StructureEdit,
    )
    from emery.systems.parsers import ParseError, ParserConfig
    from emery.systems.prompt_program import PromptProgram
    from emery.systems.stages import MessageTemplate, PromptProgramConfig, StageConfig
    from emery.systems.templates import placeholders, render

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "ComponentCall": "emery.systems.base",
        "RunContext": "emery.systems.base",
        "System": "emery.systems.base",
        "SystemRun": "emery.systems.base",
        "MutatesStructure": "emery.systems.capabilities",
        "ProposesCode": "emery.systems.capabilities",
        "StagedPrompts": "emery.systems.capabilities",
        "StructureEdit": "emery.systems.capabilities",
        "ParseError": "emery.systems.parsers",
        "ParserConfig": "emery.systems.parsers",
        "MessageTemplate": "emery.systems.stages",
        "PromptProgram": "emery.systems.prompt_program",
        "PromptProgramConfig": "emery.systems.stages",
        "StageConfig": "emery.systems.stages",
        "placeholders": "emery.systems.templates",
        "render": "emery.systems.templates",
    },
)

__all__ = [
    "ComponentCall",
    "MessageTemplate",
    "MutatesStructure",
    "ParseError",
    "ParserConfig",
    "PromptProgram",
    "PromptProgramConfig",
    "ProposesCode",
    "RunContext",
    "StageConfig",
    "StagedPrompts",
    "StructureEdit",
    "System",
    "SystemRun",
    "placeholders",
    "render",
]
