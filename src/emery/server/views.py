"""What the API answers with, built from store records: jobs with their progress,
candidates with per-split scores, diffs, and spans as a tree."""

from __future__ import annotations

from typing import Any, Literal

from emery.algorithms.lineage import component_diff
from emery.algorithms.registry import register_builtin_payloads
from emery.core.errors import EmeryError
from emery.core.events import PAYLOADS, PlanPayload
from emery.core.models import Candidate
from emery.core.spans import SpanRecord
from emery.jobs.ownership import is_stale
from emery.store.protocol import Store
from emery.store.records import CandidateRecord, JobRecord
from emery.store.states import NotFound

SPLITS = ("train", "val", "test")
DiffBase = Literal["parent", "seed"]


def budget_limits(job: JobRecord) -> dict[str, Any]:
    """The job's configured budget (unset limits left out)."""
    config = job.resolved_config or job.config
    budget = (config.get("job") or {}).get("budget") or {}
    return {key: value for key, value in budget.items() if value is not None}


def job_view(store: Store, job: JobRecord, *, full: bool = False) -> dict[str, Any]:
    """A job as JSON: its row (config and result only when ``full``), whether its run is
    gone, how many approval requests wait for a person, and the budget used against the
    configured limits."""
    exclude = None if full else {"config", "resolved_config", "result"}
    view = job.model_dump(mode="json", exclude=exclude)
    checkpoint = store.get_checkpoint(job.id)
    view["stale"] = is_stale(job)
    view["pending_approvals"] = len(store.list_approvals(job.id, status="pending"))
    view["budget"] = {
        "limits": budget_limits(job),
        "used": checkpoint.budget if checkpoint else {},
        "checkpoint": checkpoint.number if checkpoint else None,
    }
    if full:
        view["usage"] = checkpoint.usage if checkpoint else {}
        view["plan"] = plan_view(store, job.id)
    return view


def _figures(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Scalars of ``data``, nested keys joined with dots (``metric_calls.total``)."""
    figures: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            figures.update(_figures(value, f"{prefix}{key}."))
        elif not isinstance(value, list) and key != "summary":
            figures[f"{prefix}{key}"] = value
    return figures


def plan_view(store: Store, job_id: str) -> dict[str, Any] | None:
    """What the job's algorithm planned at its start (its latest ``*.plan`` event, such
    as ``mipro.plan``): the one-line summary the CLI prints, the figures and the notes;
    None when it recorded no plan."""
    register_builtin_payloads()
    kinds = sorted(kind for kind, model in PAYLOADS.items() if issubclass(model, PlanPayload))
    events = store.list_events(job_id, kinds=kinds)
    if not events:
        return None
    latest = events[-1]
    notes = latest.data.get("notes")
    return {
        "kind": latest.kind,
        "seq": latest.seq,
        "summary": latest.data.get("summary"),
        "figures": _figures(latest.data),
        "notes": [str(note) for note in notes] if isinstance(notes, list) else [],
    }


def _score(record: CandidateRecord | None) -> dict[str, Any] | None:
    if record is None or not record.n:
        return None
    return {
        "score": record.score,
        "n": record.n,
        "failed": record.failed,
        "timeouts": record.timeouts,
        "unreadable": record.unreadable,
    }


def candidate_views(store: Store, job_id: str) -> list[dict[str, Any]]:
    """Every candidate of a job in the order it was made, with lineage and a score per
    split (None where it was not scored on that split)."""
    by_split = {
        split: {r.id: r for r in store.list_candidates(job_id, split=split, limit=None).items}
        for split in SPLITS
    }
    records = sorted(by_split["val"].values(), key=lambda record: record.ordinal)
    return [
        {
            **record.candidate.model_dump(mode="json"),
            "ordinal": record.ordinal,
            "scores": {split: _score(by_split[split].get(record.id)) for split in SPLITS},
        }
        for record in records
    ]


def candidate_view(store: Store, job_id: str, candidate_id: str) -> dict[str, Any]:
    """One candidate (id or unique prefix) in full, with its per-split scores."""
    for view in candidate_views(store, job_id):
        if view["id"] == candidate_id or (
            len(candidate_id) >= 4 and str(view["id"]).startswith(candidate_id)
        ):
            return view
    raise NotFound(f"job {job_id} has no candidate {candidate_id!r}")


def seed_id(store: Store, job_id: str) -> str | None:
    """The job's seed candidate: as its checkpoint names it, else its first candidate."""
    checkpoint = store.get_checkpoint(job_id)
    named = checkpoint.state.get("seed_candidate_id") if checkpoint else None
    if isinstance(named, str):
        return named
    first = store.list_candidates(job_id, sort="ordinal", limit=1).items
    return first[0].id if first else None


def _base(store: Store, job_id: str, candidate: Candidate, against: DiffBase) -> Candidate | None:
    base_id = candidate.lineage.parents[0] if candidate.lineage.parents else None
    if against == "seed":
        base_id = seed_id(store, job_id)
    if base_id is None or base_id == candidate.id:
        return None
    try:
        return store.get_candidate(job_id, base_id)
    except EmeryError:  # a parent from another job
        return None


def diff_view(store: Store, job_id: str, candidate_id: str, against: DiffBase) -> dict[str, Any]:
    """A candidate's changes against its first parent or the job's seed: a unified diff
    and the texts of each component that differs."""
    candidate = store.get_candidate(job_id, candidate_view(store, job_id, candidate_id)["id"])
    base = _base(store, job_id, candidate, against)
    before = base.components if base is not None else {}
    names = sorted(set(before) | set(candidate.components)) if base is not None else []
    changed = [
        {"name": name, "before": before.get(name, ""), "after": candidate.components.get(name, "")}
        for name in names
        if before.get(name, "") != candidate.components.get(name, "")
    ]
    diff = (
        component_diff(base, candidate, before_label=against, after_label="candidate")
        if base is not None
        else ""
    )
    return {
        "candidate_id": candidate.id,
        "against": against,
        "against_id": base.id if base is not None else None,
        "diff": diff,
        "components": changed,
    }


def _parent_key(span: SpanRecord) -> str | None:
    return f"{span.trace_id}:{span.parent_id}" if span.parent_id else None


def _in_cycle(key: str, parents: dict[str, str | None]) -> bool:
    """Whether following parents from ``key`` comes back to it (malformed ingested spans)."""
    seen = {key}
    current = parents.get(key)
    while current is not None and current in parents:
        if current in seen:
            return True
        seen.add(current)
        current = parents[current]
    return False


def span_tree(spans: list[SpanRecord]) -> list[dict[str, Any]]:
    """Spans as nested ``children`` lists: a span whose parent is not among them (or that
    sits in a parent cycle) is a root. Siblings keep the order given."""
    nodes: dict[str, dict[str, Any]] = {}
    parents: dict[str, str | None] = {}
    for span in spans:
        key = f"{span.trace_id}:{span.span_id}"
        node = {**span.model_dump(mode="json"), "duration_s": span.duration_s, "children": []}
        nodes[key], parents[key] = node, _parent_key(span)
    roots: list[dict[str, Any]] = []
    for key, node in nodes.items():
        parent_key = parents[key]
        if parent_key in nodes and parent_key != key and not _in_cycle(key, parents):
            nodes[parent_key]["children"].append(node)
        else:
            roots.append(node)
    return roots
