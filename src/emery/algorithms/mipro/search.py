"""The TPE side of MIPRO: an Optuna study rebuilt from the stored trials.

Each trial builds a fresh in-memory study, replays every recorded trial into it with
``create_trial`` + ``add_trial`` and asks for the next point with a ``TPESampler``
seeded from the algorithm's own checkpointed RNG. Nothing lives only in memory, so a
resumed run samples exactly what an uninterrupted one would.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution
from optuna.samplers import TPESampler
from optuna.study import StudyDirection
from optuna.trial import create_trial

from emery.algorithms.mipro.state import ComboRecord, MiproState, TrialRecord


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
    costs: int = 0,
) -> list[dict[str, int]]:
    """TPE's next ``count`` choices of indices given every trial so far. Asked together,
    the later ones see the earlier ones as running trials scored at the worst value so far
    (Optuna's constant liar), so one step's trials spread instead of repeating.

    With ``costs`` (the number of costs among the job's objectives) the study has the
    score to maximize and each trial's ``costs`` to minimize: TPE's good group is then the
    trials on the front, so cheap combinations that score well are tried more."""
    dists = distributions(spaces)
    with _quiet_optuna():
        sampler = TPESampler(
            seed=seed,
            n_startup_trials=startup_trials,
            multivariate=True,
            constant_liar=count > 1,
        )
        directions = [StudyDirection.MAXIMIZE] + [StudyDirection.MINIMIZE] * costs
        study = optuna.create_study(directions=directions, sampler=sampler)
        for record, values in zip(history, _values(history, costs), strict=True):
            study.add_trial(
                create_trial(
                    params={name: record.params.get(name, 0) for name in dists},
                    distributions=dists,
                    values=values,
                    user_attrs={"kind": record.kind, "number": record.number},
                )
            )
        trials = [study.ask(dists) for _ in range(count)]
    return [{name: int(trial.params[name]) for name in dists} for trial in trials]


def _values(history: Sequence[TrialRecord], costs: int) -> list[list[float]]:
    """Each trial's objective values: its score, then its ``costs`` first costs; a trial
    recorded without them (in a checkpoint from before costs were kept) takes the highest
    of each cost recorded, or 0 when none is."""
    worst = [
        max((r.costs[i] for r in history if len(r.costs) > i), default=0.0) for i in range(costs)
    ]
    return [
        [record.score]
        + [record.costs[i] if len(record.costs) > i else worst[i] for i in range(costs)]
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
