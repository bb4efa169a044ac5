"""The data every layer shares: examples, datasets, demos and candidates."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import cached_property
from typing import Any, Literal, NotRequired

from pydantic import BaseModel, ConfigDict, Field, computed_field
from typing_extensions import TypedDict

from emery.core.errors import DataError
from emery.core.hashing import content_hash

Split = Literal["train", "val", "test"]
SPLITS: tuple[Split, ...] = ("train", "val", "test")


class ChatMessage(TypedDict):
    """One chat message in the OpenAI wire format."""

    role: str
    content: str
    name: NotRequired[str]


class Example(BaseModel):
    """One dataset row: an id, the input fields, an optional gold output and free metadata."""

    model_config = ConfigDict(frozen=True)

    id: str
    input: dict[str, Any]
    expected: Any = None
    meta: dict[str, Any] = Field(default_factory=dict)


class Dataset(BaseModel):
    """Examples divided into train (search), val (selection) and test (reporting only).

    ``verifier`` is the scoring a data file suggests (a task set's verifier section).
    """

    name: str = "dataset"
    description: str = ""
    train: list[Example] = Field(default_factory=list)
    val: list[Example] = Field(default_factory=list)
    test: list[Example] = Field(default_factory=list)
    verifier: dict[str, Any] | None = None

    def split(self, name: Split) -> list[Example]:
        """The examples of one split."""
        examples: list[Example] = getattr(self, name)
        return examples

    def __iter__(self) -> Iterator[Example]:  # type: ignore[override]
        for split in SPLITS:
            yield from self.split(split)

    def sizes(self) -> dict[Split, int]:
        """Number of examples per split."""
        return {split: len(self.split(split)) for split in SPLITS}

    def limited(self, limit: int | None) -> Dataset:
        """A copy with at most ``limit`` examples in each split (all when ``limit`` is None)."""
        if limit is None:
            return self
        return self.model_copy(update={split: self.split(split)[:limit] for split in SPLITS})

    def first(self, sizes: Mapping[Split, int | None]) -> Dataset:
        """A copy keeping the first ``sizes[split]`` examples of each named split (in order);
        a split whose size is None is kept whole. Asking for more than a split holds is an
        error, so a config never silently gets fewer examples than it asked for."""
        update: dict[str, list[Example]] = {}
        for split, size in sizes.items():
            if size is None:
                continue
            have = len(self.split(split))
            if size > have:
                raise DataError(
                    f"dataset.n_{split} = {size}, but the {split} split has only {have} examples"
                )
            update[split] = self.split(split)[:size]
        return self.model_copy(update=update)


class Demo(BaseModel):
    """A worked example shown to a stage: its input fields and the reply it should give."""

    model_config = ConfigDict(frozen=True)

    inputs: dict[str, Any]
    output: str
    source: Literal["labeled", "bootstrapped", "manual"] = "manual"
    example_id: str | None = None


class Lineage(BaseModel):
    """How a candidate came to be: its parents, generation and the operation that made it."""

    model_config = ConfigDict(frozen=True)

    parents: tuple[str, ...] = ()
    generation: int = 0
    operation: str = "seed"
    iteration: int | None = None
    details: dict[str, Any] = Field(default_factory=dict)


class Candidate(BaseModel):
    """A full assignment of a system's text components plus few-shot demos per stage.

    Identity is the content hash of ``components`` and ``demos``: two candidates with the
    same texts are the same candidate whatever their lineage.
    """

    model_config = ConfigDict(frozen=True)

    components: dict[str, str]
    demos: dict[str, tuple[Demo, ...]] = Field(default_factory=dict)
    lineage: Lineage = Field(default_factory=Lineage)

    @computed_field  # type: ignore[prop-decorator]
    @cached_property
    def id(self) -> str:
        """Content hash of the components and demos."""
        return candidate_id(self.components, self.demos)

    def derive(
        self,
        *,
        components: Mapping[str, str] | None = None,
        demos: Mapping[str, tuple[Demo, ...]] | None = None,
        lineage: Lineage,
    ) -> Candidate:
        """A child with some components or demo sets replaced."""
        return Candidate(
            components={**self.components, **(components or {})},
            demos={**self.demos, **(demos or {})},
            lineage=lineage,
        )


def candidate_id(components: Mapping[str, str], demos: Mapping[str, tuple[Demo, ...]]) -> str:
    """The content hash that identifies a candidate."""
    demo_payload = {
        stage: [demo.model_dump(include={"inputs", "output"}) for demo in stage_demos]
        for stage, stage_demos in demos.items()
        if stage_demos
    }
    return content_hash({"components": dict(components), "demos": demo_payload})
