"""Published prompts: a succeeded job's best candidate as the next version of a named prompt.

Each version is a store resource named ``prompt:NAME`` (kind ``prompt``) that records the
candidate's components and demos, its stages' message templates, the job and candidate it
came from, the best and seed scores on val and test, and the diff against the seed.
Versions are never changed or removed: a rollback publishes an older version's content
again as a new version.

``PublishedPrompt.chat`` turns an application's messages into the chat the job scored:
the instruction, the demos (rendered through the stage's templates) and the stage's
layout around the application's own turn; the LM proxy's prompt route sends that.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from emery.algorithms.lineage import component_diff
from emery.config.loading import job_config
from emery.config.resolve import resolve_job
from emery.core.errors import ConfigError, EmeryError
from emery.core.models import Candidate, ChatMessage, Demo
from emery.data.trace_template import TraceTemplate
from emery.reports.job_result import JobResult, build_result
from emery.store.protocol import Store
from emery.store.records import JobRecord, ResourceRecord
from emery.store.states import NotFound
from emery.systems.capabilities import StagedPrompts
from emery.systems.prompt_layout import StageLayout, is_choice_component
from emery.systems.prompt_program import stage_chat
from emery.systems.stages import MessageTemplate
from emery.systems.templates import placeholders

log = logging.getLogger(__name__)

PROMPT_KIND = "prompt"
RESOURCE_PREFIX = "prompt:"
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
PUBLISHABLE_STATE = "succeeded"
MAX_VERSION = 2**31 - 1
STAGED = ("prompt_program", "graph")
"""The ``[system]`` kinds built again at publish to read their stages' templates; another
(an agent in the user's code) is not built, so not imported, there."""


class PromptScores(BaseModel):
    """The published candidate's mean scores and the seed's, as the job measured them."""

    val: float | None = None
    test: float | None = None
    seed_val: float | None = None
    seed_test: float | None = None


class PublishedPrompt(BaseModel):
    """One version of a named prompt and where it came from."""

    name: str
    version: int = 0
    components: dict[str, str]
    demos: dict[str, tuple[Demo, ...]] = Field(default_factory=dict)
    templates: dict[str, tuple[MessageTemplate, ...]] = Field(default_factory=dict)
    """Each stage's message templates in the job's prompt program: they render the demos
    as the job showed them and read an application's fields back from its messages (empty
    for a version published before templates were recorded)."""
    job_id: str
    job_name: str
    candidate_id: str
    config: dict[str, Any] | None = None
    """The job's config as given (its system, task model and verifier): what serves the
    whole system (``reports.served``) once the job itself is gone. None for a version
    published before it was recorded (the job's stored config serves it)."""
    base_dir: str | None = None
    """The job's folder, where its config's relative paths start."""
    scores: PromptScores = PromptScores()
    diff: str = ""
    """A unified diff per changed component, seed → published candidate ("" if none)."""
    rolled_back_to: int | None = None
    """The version this one repeats, for a version made by a rollback."""
    published_at: datetime | None = None

    def text(self, component: str | None = None) -> str:
        """The text of ``component``; without one, of the only component there is."""
        return self.components[self.component(component)]

    def component(self, component: str | None = None) -> str:
        """``component`` if this version has it; without one, its only text component
        (structural choices such as ``stage:demos`` are not texts)."""
        texts = [name for name in self.components if not is_choice_component(name)]
        names = ", ".join(texts) or "none"
        if component is None:
            if len(texts) != 1:
                raise ConfigError(
                    f"prompt {self.name!r} version {self.version} has the components {names}:"
                    " name one"
                )
            return texts[0]
        if component not in texts:
            raise NotFound(
                f"prompt {self.name!r} version {self.version} has no component {component!r}"
                f" (it has {names})"
            )
        return component

    def chat(
        self, messages: Sequence[ChatMessage], component: str | None = None
    ) -> list[ChatMessage]:
        """The chat this version sends for an application's ``messages`` (its own system
        message, if first, replaced): the instruction of ``component``, its demos and its
        layout around the application's turn, as the job scored them. The application's
        fields are read back through the stage's templates when the instruction or the
        layout needs them; a request that does not fit them, or a layout with a second
        call (the answer stage), is a ``ConfigError``."""
        stage = self.component(component)
        text, demos = self.components[stage], self.demos.get(stage, ())
        layout = StageLayout.of(self.components, stage)
        if layout.answer != "off":
            raise ConfigError(
                f"stage {stage!r} of prompt {self.name!r} version {self.version} asks again"
                " for the final answer when a reply cannot be read (its layout's answer"
                " stage), which one chat cannot do: run it as a prompt program instead"
            )
        turn = list(messages[1:] if messages and messages[0]["role"] == "system" else messages)
        templates = self.templates.get(stage, ())
        reads = placeholders(text) | placeholders(layout.reminder)
        needs_fields = bool(reads) or (layout.select == "nearest" and bool(demos))
        if (demos or needs_fields) and not templates:
            raise ConfigError(
                f"prompt {self.name!r} version {self.version} was published without its"
                f" stage's message templates, so its demos or fields cannot be served:"
                f" publish job {self.job_id} again"
            )
        fields: dict[str, Any] = self._fields(stage, templates, turn) if needs_fields else {}
        return stage_chat(templates, text, demos, fields, layout, turn=turn)

    def _fields(
        self, stage: str, templates: Sequence[MessageTemplate], turn: list[ChatMessage]
    ) -> dict[str, Any]:
        found = TraceTemplate([(m.role, m.template) for m in templates]).match(turn)
        if found.fields is None:
            raise ConfigError(
                f"the request's messages do not fit the templates stage {stage!r} of prompt"
                f" {self.name!r} was scored with ({found.status}: {found.reason})"
            )
        return found.fields


def check_name(name: str) -> str:
    """``name`` if it can name a prompt (letters, digits, ``.``, ``_``, ``-``; at most 100)."""
    if not NAME_PATTERN.fullmatch(name):
        raise ConfigError(
            f"prompt name {name!r} must be 1-100 letters, digits, '.', '_' or '-',"
            " starting with a letter or digit"
        )
    return name


def check_version(version: int | None) -> int | None:
    """``version`` if it can number a prompt's version (None: the latest)."""
    if version is not None and not 1 <= version <= MAX_VERSION:
        raise ConfigError(f"a prompt version is a number from 1 to {MAX_VERSION}, not {version}")
    return version


def check_publishable(record: JobRecord) -> None:
    """EmeryError unless ``record`` is a job whose best candidate can be published."""
    if record.state != PUBLISHABLE_STATE:
        raise EmeryError(
            f"job {record.id} is {record.state}: only a succeeded job's best candidate"
            " can be published"
        )


def publishable_best(store: Store, job: str) -> tuple[JobRecord, JobResult, Candidate]:
    """The succeeded ``job`` (id, prefix or name), its result and its best candidate; a job
    that cannot be published is an ``EmeryError``."""
    record = store.get_job(store.resolve_job_id(job))
    check_publishable(record)
    result = build_result(store, record)
    best = result.best_candidate
    if best is None:
        raise EmeryError(
            f"job {record.id} ({record.kind}) has no best candidate: only a prompt job's"
            " can be published"
        )
    return record, result, best


def publish(store: Store, job: str, name: str) -> PublishedPrompt:
    """Store the best candidate of the succeeded ``job`` (id, prefix or name) as the next
    version of ``name``."""
    check_name(name)
    record, result, best = publishable_best(store, job)
    seed = result.seed_candidate
    prompt = PublishedPrompt(
        name=name,
        components=dict(best.components),
        demos=dict(best.demos),
        templates=stage_templates(record),
        job_id=record.id,
        job_name=record.name,
        candidate_id=best.id,
        config=dict(record.resolved_config or record.config),
        base_dir=record.base_dir,
        scores=PromptScores(
            val=result.best_val,
            test=result.best_test.mean if result.best_test is not None else None,
            seed_val=result.baseline_val,
            seed_test=result.baseline_test.mean if result.baseline_test is not None else None,
        ),
        diff=component_diff(seed, best, before_label="seed", after_label=name) if seed else "",
    )
    return _put(store, prompt)


def stage_templates(record: JobRecord) -> dict[str, tuple[MessageTemplate, ...]]:
    """Each stage's message templates in ``record``'s system when it is a prompt program
    (its own ``[system]``, a built-in task's or a graph's llm nodes); none for another
    system, or one that cannot be built again (a moved data file, a missing module)."""
    try:
        config = job_config(record)
        if config.system is not None and getattr(config.system, "kind", None) not in STAGED:
            return {}
        base_dir = Path(record.base_dir) if record.base_dir else None
        system = resolve_job(config, base_dir).system
    except EmeryError as exc:
        log.warning("job %s: no stage templates recorded with its prompt: %s", record.id, exc)
        return {}
    if not isinstance(system, StagedPrompts):
        return {}
    return {stage.name: tuple(stage.messages) for stage in system.config.stages}


def rollback(store: Store, name: str, to: int) -> PublishedPrompt:
    """A new version of ``name`` equal to version ``to``, so the history is kept."""
    older = show(store, name, to)
    return _put(store, older.model_copy(update={"rolled_back_to": to}))


def show(store: Store, name: str, version: int | None = None) -> PublishedPrompt:
    """Version ``version`` of ``name`` (default: the latest)."""
    check_name(name)
    check_version(version)
    try:
        record = store.get_resource(RESOURCE_PREFIX + name, version)
    except NotFound:
        if version is None:
            raise _unknown(name) from None
        latest = show(store, name).version
        raise NotFound(f"prompt {name!r} has no version {version} (latest: {latest})") from None
    return _prompt(record)


def versions(store: Store, name: str) -> list[PublishedPrompt]:
    """Every version of ``name``, oldest first."""
    check_name(name)
    found = [_prompt(r) for r in store.list_resources(RESOURCE_PREFIX + name)]
    if not found:
        raise _unknown(name)
    return found


def latest_versions(store: Store) -> list[PublishedPrompt]:
    """The latest version of every published prompt, by name."""
    latest: dict[str, PublishedPrompt] = {}
    for record in store.list_resources():
        if record.kind == PROMPT_KIND and record.name.startswith(RESOURCE_PREFIX):
            latest[record.name] = _prompt(record)  # listed by name, then version
    return sorted(latest.values(), key=lambda prompt: prompt.name)


def _put(store: Store, prompt: PublishedPrompt) -> PublishedPrompt:
    content = prompt.model_dump(mode="json", exclude={"version", "published_at"})
    record = store.put_resource(
        RESOURCE_PREFIX + prompt.name, content, kind=PROMPT_KIND, job_id=prompt.job_id
    )
    return _prompt(record)


def _prompt(record: ResourceRecord) -> PublishedPrompt:
    return PublishedPrompt.model_validate(
        {**record.content, "version": record.version, "published_at": record.created_at}
    )


def _unknown(name: str) -> NotFound:
    return NotFound(f"no published prompt {name!r} in this store (see `emery prompts list`)")
