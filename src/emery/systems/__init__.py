"""Systems: what is optimized. Each has named text components and runs one example."""

from emery.systems.base import ComponentCall, RunContext, System, SystemRun
from emery.systems.parsers import ParseError, ParserConfig
from emery.systems.prompt_program import (
    MessageTemplate,
    PromptProgram,
    PromptProgramConfig,
    StageConfig,
)
from emery.systems.templates import placeholders, render

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
