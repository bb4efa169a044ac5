"""What a person sees and does about an approval request, for the CLI, the API and the
dashboard alike.

``review`` puts a request's candidate beside what it would replace (the job's best, or the
prompt's latest published version): their texts and diff, their val scores with 95%
intervals, the paired difference with its interval, and a few val examples' outputs side
by side (those where the two differ first). ``decide`` checks and stores a person's
approve, reject (with a reason) or edit (new text for the candidate's components); an
approved publish request is published here, the other requests are applied by their job.
``request_publish`` is ``emery publish --request``: a publish request instead of a
version.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, Field

from emery.algorithms.evidence import paired
from emery.algorithms.lineage import component_diff
from emery.core.approvals import ACTIONS, Approval, new_approval_id
from emery.core.errors import ConfigError, IllegalTransition
from emery.core.example_result import ExampleResult
from emery.core.models import Candidate, Demo
from emery.core.search_events import Evidence
from emery.evaluation.stats import ScoreSummary, summarize
from emery.reports import published
from emery.store.protocol import Store
from emery.store.records import EvaluationFilter
from emery.store.states import NotFound

SAMPLES = 4
"""How many val examples' outputs a review shows side by side."""


class ReviewSide(BaseModel):
    """One side of a review: a candidate's texts and demos and its val scores (None: none
    stored)."""

    candidate_id: str | None = None
    label: str
    components: dict[str, str] = Field(default_factory=dict)
    demos: dict[str, tuple[Demo, ...]] = Field(default_factory=dict)
    val: ScoreSummary | None = None

    def as_candidate(self) -> Candidate:
        return Candidate(components=self.components, demos=self.demos)


class SampleRun(BaseModel):
    """One side's run of a sample example: its output, score and the verifier's word."""

    output: Any = None
    score: float
    feedback: str = ""
    error: str | None = None


class SampleOutput(BaseModel):
    """One val example run by both sides."""

    example_id: str
    input: Any = None
    candidate: SampleRun | None = None
    current: SampleRun | None = None


class ApprovalReview(BaseModel):
    """A request with everything a person decides it on."""

    approval: Approval
    job_name: str
    candidate: ReviewSide
    current: ReviewSide
    diff: str
    """A unified diff per changed component, current → candidate."""
    difference: Evidence | None = None
    """Candidate minus current on the val examples both were run on."""
    samples: list[SampleOutput] = Field(default_factory=list)


def job_approvals(store: Store, job: str) -> list[Approval]:
    """Every request of ``job`` (id, id prefix or name), oldest first."""
    return store.list_approvals(store.resolve_job_id(job))


def review(store: Store, approval_id: str) -> ApprovalReview:
    """The request ``approval_id`` with its candidate beside what it would replace."""
    approval = store.get_approval(approval_id)
    job = store.get_job(approval.job_id)
    scope = job.eval_scope or ""
    mine = _val_results(store, scope, approval.candidate_id)
    proposed = store.get_candidate(job.id, approval.candidate_id)
    candidate = ReviewSide(
        candidate_id=approval.candidate_id,
        label="candidate",
        components=dict(proposed.components),
        demos=dict(proposed.demos),
        val=_summary(mine),
    )
    current, theirs = _current(store, approval, scope)
    common = sorted(set(mine) & set(theirs))
    difference = None
    if common:
        difference = paired([mine[e].score for e in common], [theirs[e].score for e in common])
    return ApprovalReview(
        approval=approval,
        job_name=job.name,
        candidate=candidate,
        current=current,
        diff=component_diff(
            current.as_candidate(),
            candidate.as_candidate(),
            before_label=current.label,
            after_label="candidate",
        ),
        difference=difference,
        samples=_samples(store, mine, theirs),
    )


def decide(
    store: Store,
    approval_id: str,
    action: str,
    *,
    reason: str | None = None,
    text: str | None = None,
    component: str | None = None,
    edited: Mapping[str, str] | None = None,
) -> Approval:
    """A person's decision on a pending request: ``approve``, ``reject`` (``reason`` is
    shown to the search's reflection) or ``edit`` (``text`` for ``component``, or the only
    component; or ``edited``, component → text). An approved publish request is published
    at once; a job applies its own requests when it reads them."""
    if action not in ACTIONS:
        raise ConfigError(f"unknown action {action!r}: choose approve, reject or edit")
    approval = store.get_approval(approval_id)
    job = store.get_job(approval.job_id)
    if approval.kind == "best" and approval.status == "pending" and job.terminal:
        raise IllegalTransition(
            f"job {job.id} is {job.state}: its approval request {approval.id} can no longer"
            " be applied"
        )
    changes: dict[str, str] = {}
    if action == "edit":
        changes = _edit(store, approval, text, component, edited)
    elif text is not None or edited:
        raise ConfigError(f"only an edit takes new text, not {action}")
    reason = reason.strip() if reason and reason.strip() else None
    decided = store.decide_approval(approval.id, action, reason=reason, edited=changes)
    if decided.kind != "publish":
        return decided
    result = None
    if decided.status == "approved":
        prompt = published.publish(store, decided.job_id, decided.target or "")
        result = f"{prompt.name} version {prompt.version}"
    applied = decided.model_copy(update={"applied": True, "result": result})
    store.save_approvals([applied])
    return applied


def request_publish(store: Store, job: str, name: str) -> Approval:
    """A pending request to publish ``job``'s best candidate as the next version of
    ``name``, which an approval publishes (the same checks as publishing now)."""
    published.check_name(name)
    record, result, best = published.publishable_best(store, job)
    latest = _latest(store, name)
    return store.add_approval(
        Approval(
            id=new_approval_id(),
            job_id=record.id,
            kind="publish",
            candidate_id=best.id,
            score=result.best_val,
            current_id=latest.candidate_id if latest else None,
            current_score=latest.scores.val if latest else None,
            target=name,
        )
    )


def _edit(
    store: Store,
    approval: Approval,
    text: str | None,
    component: str | None,
    edited: Mapping[str, str] | None,
) -> dict[str, str]:
    if approval.kind == "publish":
        raise ConfigError(
            f"approval request {approval.id} is a publish request: approve or reject it"
            " (an edit is scored by a running job)"
        )
    components = store.get_candidate(approval.job_id, approval.candidate_id).components
    names = ", ".join(components)
    if (text is None) == (not edited):
        raise ConfigError("an edit needs the new text: give text (and a component) or edited")
    if text is not None:
        if component is None and len(components) != 1:
            raise ConfigError(f"the candidate has the components {names}: name one to edit")
        edited = {component or next(iter(components)): text}
    changes = dict(edited or {})
    for name, new in changes.items():
        if name not in components:
            raise ConfigError(f"the candidate has no component {name!r} (it has {names})")
        if not new.strip():
            raise ConfigError(f"the edited text of {name!r} is empty")
    if all(components[name] == new for name, new in changes.items()):
        raise ConfigError("the edit changes nothing: approve the candidate instead")
    return changes


def _current(
    store: Store, approval: Approval, scope: str
) -> tuple[ReviewSide, dict[str, ExampleResult]]:
    """What the request would replace, with its val results by example."""
    if approval.kind == "publish":
        latest = _latest(store, approval.target or "")
        if latest is None:
            return ReviewSide(label="nothing published yet"), {}
        label = f"{latest.name} version {latest.version}"
        theirs = _val_results(store, scope, latest.candidate_id)
        return ReviewSide(
            candidate_id=latest.candidate_id,
            label=label,
            components=dict(latest.components),
            demos=dict(latest.demos),
            val=_summary(theirs),
        ), theirs
    if not approval.current_id:
        return ReviewSide(label="no best yet"), {}
    theirs = _val_results(store, scope, approval.current_id)
    best = store.get_candidate(approval.job_id, approval.current_id)
    return ReviewSide(
        candidate_id=approval.current_id,
        label="current best",
        components=dict(best.components),
        demos=dict(best.demos),
        val=_summary(theirs),
    ), theirs


def _latest(store: Store, name: str) -> published.PublishedPrompt | None:
    try:
        return published.show(store, name)
    except NotFound:
        return None


def _val_results(store: Store, scope: str, candidate_id: str) -> dict[str, ExampleResult]:
    """The candidate's stored val results in ``scope``, by example."""
    found = store.list_evaluations(
        EvaluationFilter(scope=scope, candidate_id=candidate_id, split="val"), limit=None
    )
    return {record.result.example_id: record.result for record in found.items}


def _summary(results: Mapping[str, ExampleResult]) -> ScoreSummary | None:
    return summarize([r.score for r in results.values()]) if results else None


def _samples(
    store: Store, mine: Mapping[str, ExampleResult], theirs: Mapping[str, ExampleResult]
) -> list[SampleOutput]:
    """Up to ``SAMPLES`` val examples both sides ran, those where they differ first."""
    common = sorted(set(mine) & set(theirs))
    ranked = sorted(common, key=lambda e: mine[e].score == theirs[e].score)
    chosen = ranked[:SAMPLES] or sorted(mine)[:SAMPLES]
    samples = []
    for example_id in chosen:
        result = mine.get(example_id)
        samples.append(
            SampleOutput(
                example_id=example_id,
                input=_input(store, result),
                candidate=_run(result),
                current=_run(theirs.get(example_id)),
            )
        )
    return samples


def _run(result: ExampleResult | None) -> SampleRun | None:
    if result is None:
        return None
    return SampleRun(
        output=result.output, score=result.score, feedback=result.feedback, error=result.error
    )


def _input(store: Store, result: ExampleResult | None) -> Any:
    if result is None or result.rollout_id is None:
        return None
    try:
        return store.get_rollout(result.rollout_id).input
    except NotFound:
        return None
