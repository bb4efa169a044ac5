"""Finished runs of a step that a pause cut short: stored at the pause, reused on resume.

Without the LM response cache, repeating an abandoned step would pay again for every
model call its finished runs made. So when a job stops, the engine stores those results
(``stop_write``) and lists their keys in the job's metadata; a resumed engine hands them to
the evaluation service as *prepaid* (``split_stored``): the repeated step takes them
instead of running them again, yet charges and reports them as the first try did. The
list shrinks as steps commit (``metadata_after``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from emery.core.example_result import ExampleResult
from emery.evaluation.service import EvalKey, EvaluationService, eval_key
from emery.jobs.rows import evaluation_rows
from emery.jobs.runtime import Runtime
from emery.store.protocol import Store
from emery.store.records import EvaluationFilter, EvaluationRecord, StepWrite

PREPAID = "prepaid"

Results = dict[EvalKey, ExampleResult]


def prepaid_keys(metadata: dict[str, Any]) -> set[EvalKey]:
    """The keys of the stored results a job's next step may take as prepaid."""
    return {(str(c), str(e), str(s)) for c, e, s in metadata.get(PREPAID, [])}


def split_stored(
    records: Iterable[EvaluationRecord], runtime: Runtime, prepaid: set[EvalKey]
) -> tuple[Results, Results]:
    """The stored results of the job's examples (same content): (known, prepaid)."""
    known: Results = {}
    set_aside: Results = {}
    for record in records:
        result = record.result
        if runtime.hashes.get((result.split or "", result.example_id)) != record.example_hash:
            continue
        key = eval_key(result.candidate_id, result.example_id, result.split)
        (set_aside if key in prepaid else known)[key] = result
    return known, set_aside


def stored_result(store: Store, runtime: Runtime) -> Callable[[EvalKey], ExampleResult | None]:
    """How a result that left memory (``KnownResults``) is read back: the job's scope's
    stored evaluation of that candidate on that example, if its content is the same."""

    def load(key: EvalKey) -> ExampleResult | None:
        candidate_id, example_id, split = key
        found = EvaluationFilter(
            scope=runtime.scope,
            candidate_id=candidate_id,
            example_id=example_id,
            split=split or None,
        )
        for record in store.list_evaluations(found, limit=None).items:
            same_split = (record.result.split or "") == split
            if same_split and runtime.hashes.get((split, example_id)) == record.example_hash:
                return record.result
        return None

    return load


def metadata_after(metadata: dict[str, Any], service: EvaluationService) -> dict[str, Any]:
    """``metadata`` listing the prepaid results not taken yet (none: no list)."""
    updated = {key: value for key, value in metadata.items() if key != PREPAID}
    if service.prepaid:
        updated[PREPAID] = [list(key) for key in service.prepaid]
    return updated


def stop_write(
    runtime: Runtime,
    service: EvaluationService,
    metadata: dict[str, Any],
    *,
    job_id: str,
    owner: str,
) -> StepWrite | None:
    """The transaction storing the prepaid results before a stop (None: nothing to store)."""
    if not service.prepaid and PREPAID not in metadata:
        return None
    evaluations, rollouts, attempts = evaluation_rows(
        runtime, list(service.prepaid.values()), job_id=job_id, owner=owner
    )
    return StepWrite(
        evaluations=evaluations,
        rollouts=rollouts,
        attempts=attempts,
        job_fields={"metadata": metadata_after(metadata, service)},
        expect_owner=owner,
    )
