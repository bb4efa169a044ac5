"""``[algorithm.apo]``: beam shape, batch sizes, which LMs critique and edit, prompt files."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationInfo, field_validator

from emery.algorithms.apo.prompts import PromptKind, load_prompts
from emery.algorithms.base import AlgorithmSettings
from emery.core.errors import ConfigError
from emery.lm.usage import ROLES


class ApoSettings(AlgorithmSettings):
    """Settings of APO (textual gradients with beam search)."""

    beam_width: int = Field(default=4, ge=1, description="candidates kept after each round")
    branch_factor: int = Field(default=4, ge=1, description="children proposed per parent")
    rounds: int = Field(default=3, ge=1, description="rounds of expansion and selection")
    gradient_batch_size: int = Field(
        default=4, ge=1, description="train examples run for each critique"
    )
    val_batch_size: int | None = Field(
        default=None,
        ge=1,
        description=(
            "val examples the beam and its children are ranked on (default: what a"
            " 20-point difference needs, 55, or all of val; see algorithms.separation)"
        ),
    )
    diversity_temperature: float = Field(
        default=1.0, ge=0.0, le=2.0, description="sampling temperature of critiques and edits"
    )
    gradient_role: str = Field(default="reflection", description="LM role that writes critiques")
    edit_role: str = Field(default="reflection", description="LM role that rewrites prompts")
    run_initial_validation: bool = Field(
        default=True, description="score the seed on full val before searching (the baseline)"
    )
    components: list[str] | None = Field(
        default=None, description="components to optimize (default: every component)"
    )
    component_selection: Literal["round_robin", "random"] = "round_robin"
    critique_prompts: list[Path] | None = Field(
        default=None, description="critique prompt files replacing the shipped ones"
    )
    edit_prompts: list[Path] | None = Field(
        default=None, description="edit prompt files replacing the shipped ones"
    )
    critique_max_tokens: int = Field(default=400, ge=16)
    edit_max_tokens: int = Field(default=500, ge=16)
    max_message_chars: int = Field(
        default=600, ge=40, description="longest message text shown in an experiment"
    )
    skip_perfect_batches: bool = Field(
        default=True, description="propose nothing from a train batch where every run scored 1"
    )
    operator_children: int = Field(
        default=2,
        ge=0,
        description=(
            "prompt programs: LM-free edit-operator children added per beam parent and round,"
            " beside the LM's edits"
        ),
    )
    proposals_per_step: int = Field(
        default=1,
        ge=1,
        description=(
            "expansions per step (their train batches, critiques and edits run at once), and"
            " candidates scored on the val batch per step"
        ),
    )
    seed_lm_calls: bool = Field(
        default=True,
        description="send a seed drawn from the search RNG with each critique and edit call",
    )

    @field_validator("gradient_role", "edit_role")
    @classmethod
    def _known_role(cls, role: str) -> str:
        if role not in ROLES:
            raise ValueError(f"unknown LM role {role!r}; roles: {', '.join(ROLES)}")
        return role

    @field_validator("critique_prompts", "edit_prompts")
    @classmethod
    def _prompt_files(cls, paths: list[Path] | None, info: ValidationInfo) -> list[Path] | None:
        kind: PromptKind = "critique" if info.field_name == "critique_prompts" else "edit"
        if paths is not None:
            try:
                load_prompts(kind, paths)
            except ConfigError as exc:
                raise ValueError(str(exc)) from None
        return paths
