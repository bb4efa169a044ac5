"""Published prompts: a succeeded job's best candidate as the next version of a named prompt.

Each version is a store resource named ``prompt:NAME`` (kind ``prompt``) that records the
candidate's components and demos, the job and candidate it came from, the best and seed
scores on val and test, and the diff against the seed. Versions are never changed or
removed: a rollback publishes an older version's content again as a new version.
"""

from __future__ import annotations

import re
from datetime import datetime

from pydantic import BaseModel, Field

from emery.algorithms.lineage import component_diff
from emery.core.errors import ConfigError, EmeryError
from emery.core.models import Candidate, Demo
from emery.reports.results import JobResult, build_result
from emery.store.protocol import Store
from emery.store.records import JobRecord, ResourceRecord
from emery.store.states import NotFound

PROMPT_KIND = "prompt"
RESOURCE_PREFIX = "prompt:"
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
PUBLISHABLE_STATE = "succeeded"
MAX_VERSION = 2**31 - 1


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
    job_id: str
    job_name: str
    candidate_id: str
    scores: PromptScores = PromptScores()
    diff: str = ""
    """A unified diff per changed component, seed → published candidate ("" if none)."""
    rolled_back_to: int | None = None
    """The version this one repeats, for a version made by a rollback."""
    published_at: datetime | None = None

    def text(self, component: str | None = None) -> str:
        """The text of ``component``; without one, of the only component there is."""
        names = ", ".join(self.components) or "none"
        if component is None:
            if len(self.components) != 1:
                raise ConfigError(
                    f"prompt {self.name!r} version {self.version} has the components {names}:"
                    " name one"
                )
            return next(iter(self.components.values()))
        if component not in self.components:
            raise NotFound(
                f"prompt {self.name!r} version {self.version} has no component {component!r}"
                f" (it has {names})"
            )
        return self.components[component]


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
        job_id=record.id,
        job_name=record.name,
        candidate_id=best.id,
        scores=PromptScores(
            val=result.best_val,
            test=result.best_test.mean if result.best_test is not None else None,
            seed_val=result.baseline_val,
            seed_test=result.baseline_test.mean if result.baseline_test is not None else None,
        ),
        diff=component_diff(seed, best, before_label="seed", after_label=name) if seed else "",
    )
    return _put(store, prompt)


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
