"""``[algorithm.graph_gepa]``: GEPA's settings plus how often, and within what cost, the
structure of the graph is changed."""

from __future__ import annotations

from pydantic import Field

from emery.algorithms.gepa.settings import GepaSettings


class GraphGepaSettings(GepaSettings):
    """GEPA over a graph's node texts and its structure (see ``graph_gepa``).

    There is no population or generation count: like GEPA, the search runs one child per
    iteration until the budget (or a stop rule) ends it.
    """

    structure_every: int = Field(
        default=2,
        ge=0,
        description=(
            "every n-th iteration proposes a structural child instead of a text one (a text"
            " one when no structural child is left); 0: structure only as the fallback"
            " when neither the reflection nor an edit operator gives a child"
        ),
    )
    target_llm_calls: int | None = Field(
        default=None,
        ge=1,
        description=(
            "most LM calls per example a graph may make (each llm node's samples); a"
            " structural child over it is rejected before any rollout"
        ),
    )
    lm_structure: bool = Field(
        default=True,
        description=(
            "when the templates have no child left for a parent, ask the reflection model"
            " for a whole new graph (validated like the templates' children)"
        ),
    )
    vote_samples: int = Field(
        default=3, ge=2, le=16, description="samples of a node the vote mutation adds"
    )
