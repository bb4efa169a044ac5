"""The TPE side of MIPRO: an Optuna study rebuilt from the stored trials.

Each trial builds a fresh in-memory study, replays every recorded trial into it with
``create_trial`` + ``add_trial`` and asks for the next point with a ``TPESampler``
seeded from the algorithm's own checkpointed RNG. Nothing lives only in memory, so a
resumed run samples exactly what an uninterrupted one would. A suggestion of a candidate
already scored is told its score and replaced, so every trial scores a new candidate.
"""

from __future__ import annotations

import itertools
import logging
import random
import warnings
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution
from optuna.samplers import TPESampler
from optuna.study import StudyDirection
from optuna.trial import create_trial

from emery.algorithms.mipro.state import ComboRecord, MiproState, TrialRecord
from emery.core.example_result import ExampleResult
from emery.evaluation.objectives import CandidateCost, cost_per_example
from emery.evaluation.selection import BEST_SCORE, SelectRule

log = logging.getLogger(__name__)

RESAMPLES = 20
"""Times TPE is asked again after suggesting a scored candidate, then random draws."""
SCAN = 10_000
"""Choices looked at in index order, after the draws, for an untried one."""


@contextmanager
def _quiet_optuna() -> Iterator[None]:
    """Silence Optuna's per-study INFO lines and experimental-feature warnings."""
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            yield
    finally:
        optuna.logging.set_verbosity(verbosity)


def distributions(spaces: Mapping[str, int]) -> dict[str, BaseDistribution]:
    """One categorical distribution over choice indices per parameter."""
    return {name: CategoricalDistribution(list(range(count))) for name, count in spaces.items()}


def next_params(
    spaces: Mapping[str, int],
    history: Sequence[TrialRecord],
    *,
    seed: int,
    startup_trials: int,
    count: int = 1,
    rule: SelectRule = BEST_SCORE,
    identify: Callable[[Mapping[str, int]], str] | None = None,
    designed: Sequence[Mapping[str, int]] = (),
) -> list[dict[str, int]]:
    """TPE's next ``count`` choices of indices given every trial so far. Asked together,
    the later ones see the earlier ones as running trials scored at the worst value so far
    (Optuna's constant liar), so one step's trials spread instead of repeating.

    The study maximizes what the job's ``select`` rule aims for (``SelectRule.aim``): the
    score alone by default; with ``cheapest_within`` the score and the cost saved, a front
    that holds only the trials within the margin of the best (TPE's good group is then
    the front's, so cheaper combinations that score as well are tried more).

    With ``identify`` (the candidate a choice of indices makes) no choice repeats a
    candidate already scored or picked: TPE is told the scored candidate's value (a
    picked one's: the worst so far) and asked again, up to ``RESAMPLES`` times, then an
    untried choice is drawn from ``seed`` (``untried``). Fewer than ``count`` come back
    only when no untried choice is left. ``designed`` choices (``mipro.screening``) come
    first, in order, those already taken skipped; TPE picks the rest."""
    dists = distributions(spaces)
    values = _aims(history, rule)
    width = len(rule.aim(0.0, CandidateCost(), 0.0, CandidateCost()))
    scored = {record.candidate_id: aim for record, aim in zip(history, values, strict=True)}
    worst = tuple(min(column) for column in zip(*values, strict=True)) if values else None
    taken = set(scored)
    picks: list[dict[str, int]] = []
    resampled = 0
    with _quiet_optuna():
        sampler = TPESampler(
            seed=seed,
            n_startup_trials=startup_trials,
            multivariate=True,
            constant_liar=count > 1,
        )
        study = optuna.create_study(directions=[StudyDirection.MAXIMIZE] * width, sampler=sampler)
        for record, aim in zip(history, values, strict=True):
            study.add_trial(
                create_trial(
                    params={name: record.params.get(name, 0) for name in dists},
                    distributions=dists,
                    values=list(aim),
                    user_attrs={"kind": record.kind, "number": record.number},
                )
            )
        queue = [dict(choice) for choice in designed]
        for _ in range(count):
            while queue and identify is not None and identify(queue[0]) in taken:
                queue.pop(0)
            if queue:
                params = queue.pop(0)
                study.enqueue_trial(params)
                study.ask(dists)  # running: the later picks see it
                if identify is not None:
                    taken.add(identify(params))
                picks.append(params)
                continue
            for _ in range(RESAMPLES + 1):
                trial = study.ask(dists)
                params = {name: int(trial.params[name]) for name in dists}
                key = None if identify is None else identify(params)
                if key is None or key not in taken:
                    break
                resampled += 1
                study.tell(trial, list(scored.get(key) or worst or (0.0,) * width))
            else:
                assert identify is not None  # only a known candidate asks again
                drawn = untried(spaces, identify, taken, seed + len(picks))
                if drawn is None:
                    break
                study.enqueue_trial(dict(drawn))
                study.ask(dists)  # running: the later picks see it
                params, key = drawn, identify(drawn)
            if key is not None:
                taken.add(key)
            picks.append(params)
    if resampled:
        log.info("mipro: TPE suggested %d scored combinations and was asked again", resampled)
    return picks


def untried(
    spaces: Mapping[str, int],
    identify: Callable[[Mapping[str, int]], str],
    taken: Collection[str],
    seed: int,
) -> dict[str, int] | None:
    """A choice of indices whose candidate is not in ``taken``: drawn at random from
    ``seed`` (``RESAMPLES`` draws), else the first in index order (the first ``SCAN``
    looked at), else None: every choice is taken."""
    rng = random.Random(seed)
    names = list(spaces)
    for _ in range(RESAMPLES):
        params = {name: rng.randrange(spaces[name]) for name in names}
        if identify(params) not in taken:
            return params
    ranges = [range(spaces[name]) for name in names]
    for combo in itertools.islice(itertools.product(*ranges), SCAN):
        params = dict(zip(names, combo, strict=True))
        if identify(params) not in taken:
            return params
    return None


def trial_cost(rule: SelectRule, results: Sequence[ExampleResult]) -> CandidateCost | None:
    """What a trial on ``results`` costs an example, kept when ``rule`` reads costs."""
    return cost_per_example(results) if rule.costs else None


def _aims(history: Sequence[TrialRecord], rule: SelectRule) -> list[tuple[float, ...]]:
    """Each trial's values under ``rule``, against the best score so far (the first trial
    to reach it); a trial recorded without its cost counts at the best's."""
    if not history:
        return []
    best = max(history, key=lambda record: record.score)
    best_cost = best.cost or CandidateCost()
    return [
        rule.aim(record.score, record.cost or best_cost, best.score, best_cost)
        for record in history
    ]


def top_combos(state: MiproState, k: int) -> list[ComboRecord]:
    """The k best combinations: full-val scored first (by that score), then by minibatch mean."""

    def rank(combo: ComboRecord) -> tuple[int, float, float]:
        full = combo.full_score
        mean = combo.minibatch_mean
        return (
            1 if full is not None else 0,
            full if full is not None else -1.0,
            mean if mean is not None else -1.0,
        )

    ordered = sorted(state.combos.values(), key=rank, reverse=True)
    return [combo.model_copy(deep=True) for combo in ordered[:k]]
