"""The suite's rows, its results file, its markdown table and its verdict on the targets.

A row is one search (or one peer run) on one set at one budget with one search seed: the
per-example test scores of the seed, the expert prompt and the winner on the same test
examples, the winner's paired difference to the seed (and to the expert) with its 95%
interval from ``emery.algorithms.evidence.paired``, and what the search cost. Rows are
appended to a JSON-lines file as they finish, so a killed run keeps what it did.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import mean
from typing import Literal

from pydantic import BaseModel, Field

from emery.algorithms.evidence import paired
from emery.core.search_events import Evidence
from emery.evaluation.stats import summarize

CHECK_BUDGET = 200
"""The budget the lift, expert and peer targets are read at."""
MIN_LIFT = 0.10
MIN_SEEDS_LIFTED = 2
OVER_EXPERT = 0.05
MEAN_LIFT = 0.15

Key = tuple[str, int, int, str]


class TrialRow(BaseModel):
    """One MIPRO trial of a row: its choices (``choices``: parameter -> where the chosen
    value came from, e.g. ``instruction.proposed``, ``demos.nearest``) and its val score."""

    number: int
    kind: str
    params: dict[str, int]
    choices: dict[str, str]
    score: float
    n: int


class SuiteRow(BaseModel):
    """One finished run of the suite (``key``: set, budget, search seed, algorithm)."""

    set: str
    budget: int
    seed: int
    algorithm: str
    peer: bool = False
    model: str = ""
    sizes: dict[str, int] = Field(default_factory=dict)
    test_ids: list[str] = Field(default_factory=list)
    scores: dict[str, list[float]] = Field(default_factory=dict)
    """Per test example (in ``test_ids`` order): ``seed``, ``expert`` (when the set has
    one) and ``best`` (the winner)."""
    vs_seed: Evidence | None = None
    vs_expert: Evidence | None = None
    metric_calls: int = 0
    lm_calls: dict[str, int] = Field(default_factory=dict)
    wall_time_s: float = 0.0
    stop_reason: str = ""
    error: str | None = None
    best_components: dict[str, str] = Field(default_factory=dict)
    trials: list[TrialRow] = Field(default_factory=list)
    """MIPRO's trials (empty for the other algorithms, the peers and older rows)."""
    winner_checks: list[dict[str, object]] = Field(default_factory=list)
    """The winner's confirmations on train (``mipro.winner_checked``,
    ``gepa.winner_checked`` events' data; empty in older rows)."""

    @property
    def key(self) -> Key:
        return (self.set, self.budget, self.seed, self.algorithm)

    def test(self, name: str) -> float | None:
        """The mean test score of ``seed``, ``expert`` or ``best`` (None when not scored)."""
        scores = self.scores.get(name)
        return mean(scores) if scores else None


def compared(scores: dict[str, list[float]]) -> tuple[Evidence | None, Evidence | None]:
    """The winner's paired evidence against the seed and against the expert (if scored)."""

    def against(name: str) -> Evidence | None:
        if "best" not in scores or name not in scores:
            return None
        return paired(scores["best"], scores[name])

    return against("seed"), against("expert")


def read_rows(path: Path) -> list[SuiteRow]:
    """The rows of a results file (one JSON object a line); none when it does not exist."""
    if not path.exists():
        return []
    lines = path.read_text().splitlines()
    return [SuiteRow.model_validate_json(line) for line in lines if line.strip()]


def append_row(path: Path, row: SuiteRow) -> None:
    """Append one finished row (a line of JSON) and flush it to disk."""
    with path.open("a") as handle:
        handle.write(row.model_dump_json() + "\n")
        handle.flush()


def _score(scores: list[float] | None) -> str:
    if not scores:
        return "—"
    s = summarize(scores)
    return f"{s.mean:.1%} ({s.low:.1%}–{s.high:.1%})"


def _points(evidence: Evidence | None) -> str:
    if evidence is None:
        return "—"
    return (
        f"{100 * evidence.difference:+.1f} [{100 * evidence.low:+.1f}, {100 * evidence.high:+.1f}]"
    )


HEADER = (
    "| set | metric calls (budget) | search seed | algorithm | seed (test) | expert (test) "
    "| best (test) | best − seed, points [95% paired] | metric calls | LM calls | wall |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|"
)


def row_markdown(row: SuiteRow) -> str:
    """One table row; a failed run says why instead of its scores."""
    head = f"| {row.set} | {row.budget} | {row.seed} | {row.algorithm} |"
    if row.error is not None:
        return f"{head} failed: {row.error} | — | — | — | {row.metric_calls} | — | — |"
    calls = ", ".join(f"{role} {n}" for role, n in sorted(row.lm_calls.items()) if n)
    return (
        f"{head} {_score(row.scores.get('seed'))} | {_score(row.scores.get('expert'))} | "
        f"{_score(row.scores.get('best'))} | {_points(row.vs_seed)} | {row.metric_calls} | "
        f"{calls or '—'} | {row.wall_time_s / 60:.1f} min |"
    )


def markdown(rows: Sequence[SuiteRow], planned: Iterable[Key] = ()) -> str:
    """The table: every row run, then every planned row not yet run."""
    done = {row.key for row in rows}
    lines = [HEADER, *(row_markdown(row) for row in sorted(rows, key=lambda r: r.key))]
    for key in planned:
        if key not in done:
            set_name, budget, seed, algorithm = key
            cells = " | ".join(["not yet run", *["—"] * 6])
            lines.append(f"| {set_name} | {budget} | {seed} | {algorithm} | {cells} |")
    return "\n".join(lines)


Status = Literal["met", "not met", "not yet run", "n/a"]


@dataclass(frozen=True)
class Target:
    """One target's status and what it was read from."""

    name: str
    status: Status
    detail: str

    def line(self) -> str:
        mark = {"met": "✓", "not met": "✗", "not yet run": "…", "n/a": "–"}[self.status]
        return f"- {mark} {self.name}: {self.status} ({self.detail})"


def _lift(row: SuiteRow) -> float:
    return row.vs_seed.difference if row.vs_seed is not None else 0.0


def best_algorithm(rows: Sequence[SuiteRow], set_name: str) -> tuple[str, list[SuiteRow]] | None:
    """The emery algorithm with the highest mean test lift over the seed on ``set_name`` at
    ``CHECK_BUDGET`` calls, and its rows (one per search seed); None when none ran."""
    by_algorithm: dict[str, list[SuiteRow]] = {}
    for row in rows:
        if (row.set, row.budget, row.peer) == (set_name, CHECK_BUDGET, False) and not row.error:
            by_algorithm.setdefault(row.algorithm, []).append(row)
    if not by_algorithm:
        return None
    name = max(by_algorithm, key=lambda a: mean(_lift(r) for r in by_algorithm[a]))
    return name, by_algorithm[name]


def set_targets(rows: Sequence[SuiteRow], set_name: str) -> list[Target]:
    """The lift, expert and peer targets of one set at ``CHECK_BUDGET`` calls."""
    found = best_algorithm(rows, set_name)
    where = f"{set_name} at {CHECK_BUDGET} calls"
    if found is None:
        return [
            Target(f"{where}: {name}", "not yet run", "no emery row")
            for name in ("lift ≥ 10 points, interval above 0", "≥ expert + 5", "above peers")
        ]
    algorithm, best = found
    lifted = [r for r in best if _lift(r) >= MIN_LIFT and r.vs_seed and r.vs_seed.low > 0]
    lifts = ", ".join(f"seed {r.seed}: {_points(r.vs_seed)}" for r in best)
    targets = [
        Target(
            f"{where}: {algorithm} lifts ≥ 10 points over the seed, interval above 0",
            "met" if len(lifted) >= MIN_SEEDS_LIFTED else "not met",
            f"{len(lifted)} of {len(best)} search seeds run; {lifts}",
        )
    ]
    over = [r.vs_expert.difference for r in best if r.vs_expert is not None]
    if not over:
        targets.append(Target(f"{where}: ≥ expert + 5", "n/a", "no expert prompt"))
    else:
        targets.append(
            Target(
                f"{where}: {algorithm} ≥ expert + 5 points",
                "met" if mean(over) >= OVER_EXPERT else "not met",
                f"mean best − expert {100 * mean(over):+.1f} points",
            )
        )
    targets.append(_peer_target(rows, set_name, algorithm, best))
    return targets


def _peer_target(
    rows: Sequence[SuiteRow], set_name: str, algorithm: str, best: Sequence[SuiteRow]
) -> Target:
    """Above every peer reading: the best algorithm's mean test score against each peer's
    (a failed peer run counts as its seed: it returned no winner)."""
    name = f"{set_name} at {CHECK_BUDGET} calls: {algorithm} above both peers"
    peers: dict[str, list[float]] = {}
    for row in rows:
        if (row.set, row.budget, row.peer) == (set_name, CHECK_BUDGET, True):
            score = row.test("seed" if row.error else "best")
            score = best[0].test("seed") if score is None else score
            peers.setdefault(row.algorithm, []).append(score or 0.0)
    if not peers:
        return Target(name, "not yet run", "no peer row (run with --peers)")
    ours = mean(r.test("best") or 0.0 for r in best)
    readings = {peer: mean(scores) for peer, scores in peers.items()}
    above = all(ours > score for score in readings.values())
    detail = f"{algorithm} {ours:.1%}; " + ", ".join(f"{p} {s:.1%}" for p, s in readings.items())
    return Target(name, "met" if above else "not met", detail)


def verdict(rows: Sequence[SuiteRow], sets: Sequence[str]) -> list[Target]:
    """Every target the suite checks, over ``sets`` (module constants)."""
    targets = [target for set_name in sets for target in set_targets(rows, set_name)]
    worse = [r for r in rows if not r.peer and r.vs_seed and r.vs_seed.verdict == "worse"]
    searched = [r for r in rows if not r.peer and not r.error]
    targets.append(
        Target(
            "no algorithm's winner significantly worse than the seed on test, at any budget",
            ("met" if searched else "not yet run") if not worse else "not met",
            ", ".join(f"{r.set}/{r.budget}/seed {r.seed}/{r.algorithm}" for r in worse)
            or f"{len(searched)} emery rows",
        )
    )
    lifts = {}
    for set_name in sets:
        found = best_algorithm(rows, set_name)
        if found is not None:
            lifts[set_name] = mean(_lift(r) for r in found[1])
    missing = [s for s in sets if s not in lifts]
    average = f"mean {100 * mean(lifts.values()):+.1f} points" if lifts else "no rows"
    targets.append(
        Target(
            f"mean lift across sets at {CHECK_BUDGET} calls ≥ 15 points",
            "not yet run"
            if missing
            else ("met" if mean(lifts.values()) >= MEAN_LIFT else "not met"),
            average + (f"; not run: {', '.join(missing)}" if missing else ""),
        )
    )
    return targets


def verdict_markdown(rows: Sequence[SuiteRow], sets: Sequence[str]) -> str:
    """The verdict section printed under the table."""
    targets = verdict(rows, sets)
    met = sum(t.status in ("met", "n/a") for t in targets)
    lines = [
        f"### Verdict ({met} of {len(targets)} targets met or not applicable)",
        "",
        f"Read on: {', '.join(sets)}.",
        "",
        *(t.line() for t in targets),
    ]
    return "\n".join(lines)


def load_for_table(path: Path) -> list[SuiteRow]:
    """The rows ``--table`` prints; a missing or unreadable file is an error line."""
    if not path.exists():
        raise SystemExit(f"error: {path} does not exist (no suite results to print)")
    try:
        return read_rows(path)
    except (ValueError, json.JSONDecodeError) as error:
        first = str(error).splitlines()[0]
        raise SystemExit(f"error: {path} is not a suite results file: {first}") from None


@dataclass
class ChannelTally:
    """What single changes from one source did against their base, on the same val examples."""

    source: str
    differences: list[float]

    def line(self) -> str:
        better = sum(d > 0 for d in self.differences)
        worse = sum(d < 0 for d in self.differences)
        ties = len(self.differences) - better - worse
        return (
            f"| {self.source} | {len(self.differences)} | {better} / {ties} / {worse} |"
            f" {100 * mean(self.differences):+.1f} | {100 * max(self.differences):+.1f} |"
        )


def channels(rows: Sequence[SuiteRow]) -> list[ChannelTally]:
    """Every designed single change (a trial that differs from its row's first trial, the
    base, in one choice, judged on as many examples) against that base, by the source of
    the changed choice."""
    tallies: dict[str, list[float]] = {}
    for row in rows:
        trials = [t for t in row.trials if t.kind != "baseline"]
        if not trials:
            continue
        base = trials[0]
        for trial in trials[1:]:
            changed = [k for k, v in trial.params.items() if v != base.params.get(k, 0)]
            if len(changed) == 1 and trial.n == base.n:
                source = trial.choices.get(changed[0], changed[0])
                tallies.setdefault(source, []).append(trial.score - base.score)
    return [ChannelTally(source, tallies[source]) for source in sorted(tallies)]


def channels_markdown(rows: Sequence[SuiteRow]) -> str:
    """The single changes' table, or "" when no row holds MIPRO's trials."""
    tallies = channels(rows)
    if not tallies:
        return ""
    head = (
        "| changed choice (source) | trials | better / tie / worse on val | mean, points |"
        " best, points |\n|---|---|---|---|---|"
    )
    return "\n".join([head, *(tally.line() for tally in tallies)])
