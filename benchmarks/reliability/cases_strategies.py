"""Bad GEPA strategies (parent selector, minibatch sampler, merge policy, edit operators,
acceptance rule): an unknown name, or a ``module:attr`` that does not import, refused
before the job is stored."""

from __future__ import annotations

from cases import PROGRAM, Case, job, train


def _setting(line: str) -> str:
    return job(extra=f'[job]\nalgorithm = "gepa"\n[algorithm.gepa]\n{line}\n') + PROGRAM


def strategy_cases() -> list[Case]:
    """Every case of this file."""
    return [
        train(
            "gepa acceptance unknown",
            "algorithm.gepa.acceptance: unknown acceptance rule 'two-stage'; known acceptance"
            " rules: evidence, two_stage",
            _setting('acceptance = "two-stage"'),
        ),
        train(
            "gepa operator unknown",
            "algorithm.gepa.operators: unknown edit operator 'nope'",
            _setting('operators = ["answer_stage", "nope"]'),
        ),
        train(
            "gepa merge policy not importable",
            "algorithm.gepa.merge_policy: cannot import module 'no_such_module'",
            _setting('merge_policy = "no_such_module:POLICY"'),
        ),
        train(
            "gepa sampler not a sampler",
            "algorithm.gepa.minibatch_sampler: 'json:dumps' is a function; expected SamplerKind",
            _setting('minibatch_sampler = "json:dumps"'),
        ),
    ]
