"""Candidates, evaluations (the evaluation cache) and systems."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, Row, Select, and_, case, func, select

from emery.core.example_result import ExampleResult
from emery.core.models import Candidate
from emery.store import schema as t
from emery.store.records import (
    CandidateRecord,
    EvaluationFilter,
    EvaluationRecord,
    Page,
    SystemRecord,
    candidate_from_row,
    to_datetime,
)
from emery.store.sql.base import SqlBase, now, order_by, paged
from emery.store.states import NotFound, require_id

_RESULT_COLUMNS = (
    "candidate_id",
    "example_id",
    "split",
    "output",
    "score",
    "feedback",
    "error",
    "calls",
    "usage",
    "lm_calls",
    "latency_s",
)
EVALUATION_SORTS = {
    "id": t.evaluations.c.id,
    "score": t.evaluations.c.score,
    "example_id": t.evaluations.c.example_id,
    "candidate_id": t.evaluations.c.candidate_id,
    "created_at": t.evaluations.c.created_at,
    "latency_s": t.evaluations.c.latency_s,
}


def evaluation_row(record: EvaluationRecord, job_id: str | None, at: float) -> dict[str, Any]:
    dumped = record.result.model_dump(mode="json")
    row = {name: dumped.pop(name) for name in _RESULT_COLUMNS}
    row["split"] = row["split"] or ""
    row.update(
        scope=record.scope,
        example_hash=record.example_hash,
        job_id=record.job_id or job_id,
        rollout_id=record.rollout_id,
        extra=dumped,
        created_at=at,
    )
    return row


def evaluation_from_row(row: Row[Any]) -> EvaluationRecord:
    data = dict(row._mapping)
    result = {name: data[name] for name in _RESULT_COLUMNS}
    result["split"] = result["split"] or None
    result.update(data["extra"] or {})
    return EvaluationRecord(
        id=data["id"],
        scope=data["scope"],
        example_hash=data["example_hash"],
        job_id=data["job_id"],
        rollout_id=data["rollout_id"],
        result=ExampleResult.model_validate(result),
        created_at=to_datetime(data["created_at"]),
    )


def candidate_row(job_id: str, candidate: Candidate, ordinal: int, at: float) -> dict[str, Any]:
    dumped = candidate.model_dump(mode="json")
    lineage = dumped["lineage"]
    return {
        "job_id": job_id,
        "candidate_id": candidate.id,
        "ordinal": ordinal,
        "components": dumped["components"],
        "demos": dumped["demos"],
        "parents": lineage["parents"],
        "generation": lineage["generation"],
        "operation": lineage["operation"],
        "iteration": lineage["iteration"],
        "details": lineage["details"],
        "created_at": at,
    }


class CandidatesMixin(SqlBase):
    """Candidates per job, evaluations per scope, and registered systems."""

    # --- candidates -------------------------------------------------------------------

    def add_candidates(self, job_id: str, candidates: Sequence[Candidate]) -> None:
        """Store candidates of a job (ones already stored keep their first lineage)."""
        with self._tx(write=True) as conn:
            self._insert_candidates(conn, job_id, candidates)

    def list_candidates(
        self,
        job_id: str,
        *,
        scope: str | None = None,
        split: str = "val",
        sort: str | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> Page[CandidateRecord]:
        """A job's candidates with their mean score and count on ``split`` within ``scope``
        (default: the job's evaluation scope). Default order: best score first."""
        with self._tx() as conn:
            if scope is None:
                scope = conn.execute(
                    select(t.jobs.c.eval_scope).where(t.jobs.c.id == job_id)
                ).scalar()
            scores = self._scores(conn, job_id, scope or "", split).subquery()
            c = t.candidates
            stmt = (
                select(
                    c,
                    scores.c.score,
                    scores.c.n,
                    scores.c.failed,
                    scores.c.timeouts,
                    scores.c.unreadable,
                )
                .select_from(c.outerjoin(scores, and_(scores.c.candidate_id == c.c.candidate_id)))
                .where(c.c.job_id == job_id)
            )
            sorts = {
                "score": scores.c.score,
                "n": scores.c.n,
                "failed": scores.c.failed,
                "ordinal": c.c.ordinal,
                "generation": c.c.generation,
                "created_at": c.c.created_at,
            }
            stmt = order_by(stmt, sorts, sort, "-score,-n,ordinal")
            rows, total = paged(conn, stmt, limit, offset)
        items = [
            CandidateRecord(
                job_id=job_id,
                ordinal=row.ordinal,
                candidate=candidate_from_row(row),
                score=None if row.score is None else float(row.score),
                n=int(row.n or 0),
                failed=int(row.failed or 0),
                timeouts=int(row.timeouts or 0),
                unreadable=int(row.unreadable or 0),
                created_at=to_datetime(row.created_at),
            )
            for row in rows
        ]
        return Page(items=items, total=total, offset=offset, limit=limit)

    @staticmethod
    def _scores(conn: Connection, job_id: str, scope: str, split: str) -> Select[Any]:
        """Mean score, count, failed runs (timed out ones apart) and unreadable replies per
        candidate on ``split`` within ``scope``, counting only the job's own examples (by
        content) when the store knows them."""
        e, je = t.evaluations, t.job_examples
        stmt = (
            select(
                e.c.candidate_id,
                func.avg(e.c.score).label("score"),
                func.count(e.c.id).label("n"),
                func.count(e.c.error).label("failed"),
                func.sum(case((e.c.extra["failure"].as_string() == "timeout", 1), else_=0)).label(
                    "timeouts"
                ),
                func.count(e.c.extra["unreadable"].as_string()).label("unreadable"),
            )
            .where(e.c.scope == scope, e.c.split == split)
            .group_by(e.c.candidate_id)
        )
        known = conn.execute(select(je.c.job_id).where(je.c.job_id == job_id).limit(1)).first()
        if known is None:  # a job stored before its examples were: the scope alone
            return stmt
        return stmt.join(
            je,
            and_(
                je.c.job_id == job_id,
                je.c.split == e.c.split,
                je.c.example_id == e.c.example_id,
                je.c.example_hash == e.c.example_hash,
            ),
        )

    def set_job_examples(self, job_id: str, hashes: Mapping[tuple[str, str], str]) -> None:
        """Record the examples of a job's dataset: (split, example id) → content hash."""
        je = t.job_examples
        rows = [
            {"job_id": job_id, "split": split, "example_id": example_id, "example_hash": digest}
            for (split, example_id), digest in hashes.items()
        ]
        with self._tx(write=True) as conn:
            conn.execute(je.delete().where(je.c.job_id == job_id))
            if rows:
                conn.execute(je.insert(), rows)

    def get_candidate(self, job_id: str, candidate_id: str) -> Candidate:
        """A job's candidate by id or unique id prefix."""
        require_id(candidate_id, "candidate")
        c = t.candidates
        with self._tx() as conn:
            rows = conn.execute(
                select(c)
                .where(c.c.job_id == job_id, c.c.candidate_id.startswith(candidate_id))
                .limit(2)
            ).all()
        if not rows:
            raise NotFound(f"job {job_id} has no candidate {candidate_id!r}")
        if len(rows) > 1:
            raise NotFound(f"{candidate_id!r} matches several candidates of job {job_id}")
        return candidate_from_row(rows[0])

    def job_candidates(self, job_id: str) -> list[Candidate]:
        """Every candidate of a job, in creation order."""
        c = t.candidates
        with self._tx() as conn:
            rows = conn.execute(select(c).where(c.c.job_id == job_id).order_by(c.c.ordinal))
            return [candidate_from_row(row) for row in rows]

    # --- evaluations ------------------------------------------------------------------

    def add_evaluations(self, records: Sequence[EvaluationRecord]) -> None:
        """Store evaluations in one transaction (a key already stored is kept as it is)."""
        with self._tx(write=True) as conn:
            self._insert_evaluations(conn, records, None)

    def load_evaluations(self, scope: str) -> list[EvaluationRecord]:
        """Every evaluation stored under ``scope``: the evaluation cache of a job."""
        with self._tx() as conn:
            rows = conn.execute(select(t.evaluations).where(t.evaluations.c.scope == scope))
            return [evaluation_from_row(row) for row in rows]

    def list_evaluations(
        self,
        filter: EvaluationFilter | None = None,
        *,
        sort: str | None = None,
        limit: int | None = 100,
        offset: int = 0,
    ) -> Page[EvaluationRecord]:
        f = filter or EvaluationFilter()
        e = t.evaluations
        stmt = select(e)
        for name in ("job_id", "scope", "candidate_id", "example_id", "split"):
            value = getattr(f, name)
            if value is not None:
                stmt = stmt.where(e.c[name] == value)
        if f.min_score is not None:
            stmt = stmt.where(e.c.score >= f.min_score)
        if f.max_score is not None:
            stmt = stmt.where(e.c.score <= f.max_score)
        if f.errors_only:
            stmt = stmt.where(e.c.error.is_not(None))
        stmt = order_by(stmt, EVALUATION_SORTS, sort, "id")
        with self._tx() as conn:
            rows, total = paged(conn, stmt, limit, offset)
        return Page(
            items=[evaluation_from_row(r) for r in rows], total=total, offset=offset, limit=limit
        )

    def count_evaluations(self, job_id: str) -> int:
        """How many evaluations a job paid for."""
        with self._tx() as conn:
            count = conn.execute(
                select(func.count()).where(t.evaluations.c.job_id == job_id)
            ).scalar()
        return int(count or 0)

    # --- systems ----------------------------------------------------------------------

    def register_system(
        self, *, name: str, kind: str, version: str, config: dict[str, Any] | None
    ) -> str:
        """Record a system (name + version) once; returns its id."""
        system_id = f"{name}@{version}"[:64]
        row = {
            "id": system_id,
            "name": name,
            "kind": kind,
            "version": version,
            "config": config,
            "created_at": now(),
        }
        with self._tx(write=True) as conn:
            self.insert_ignore(conn, t.systems, [row], ["id"])
        return system_id

    def list_systems(self, name: str | None = None) -> list[SystemRecord]:
        stmt = select(t.systems).order_by(t.systems.c.created_at)
        if name is not None:
            stmt = stmt.where(t.systems.c.name == name)
        with self._tx() as conn:
            rows = conn.execute(stmt)
            return [
                SystemRecord.model_validate(
                    {**row._mapping, "created_at": to_datetime(row.created_at)}
                )
                for row in rows
            ]

    # --- helpers shared with the step commit ------------------------------------------

    def _insert_candidates(
        self, conn: Connection, job_id: str, candidates: Sequence[Candidate]
    ) -> None:
        if not candidates:
            return
        c = t.candidates
        wanted = {candidate.id for candidate in candidates}
        stored = set(
            conn.execute(
                select(c.c.candidate_id).where(
                    c.c.job_id == job_id, c.c.candidate_id.in_(list(wanted))
                )
            ).scalars()
        )
        last = conn.execute(select(func.max(c.c.ordinal)).where(c.c.job_id == job_id)).scalar()
        ordinal = -1 if last is None else int(last)
        at = now()
        rows = []
        for candidate in candidates:
            if candidate.id in stored:
                continue
            stored.add(candidate.id)
            ordinal += 1
            rows.append(candidate_row(job_id, candidate, ordinal, at))
        self.insert_ignore(conn, c, rows, ["job_id", "candidate_id"])

    def _insert_evaluations(
        self, conn: Connection, records: Sequence[EvaluationRecord], job_id: str | None
    ) -> None:
        at = now()
        rows = [evaluation_row(record, job_id, at) for record in records]
        self.insert_ignore(conn, t.evaluations, rows, t.EVALUATION_KEY)
