"""Bad plug-in names: an algorithm, system kind or verifier kind named by ``module:attr``
that cannot be imported or is not a plug-in, and verifier settings of another kind."""

from __future__ import annotations

from cases import Case, job, train


def _algorithm(name: str) -> str:
    return job(extra=f'[job]\nalgorithm = "{name}"\n')


def _verifier(lines: str) -> str:
    return job(extra=f"[verifier]\n{lines}\n")


def registry_cases() -> list[Case]:
    """Every case of this file."""
    return [
        train(
            "algorithm module missing",
            "job.algorithm: cannot import module 'no_such_search'",
            _algorithm("no_such_search:SPEC"),
        ),
        train(
            "algorithm module fails on import",
            "job.algorithm: importing module 'raises_on_import' failed",
            _algorithm("raises_on_import:SPEC"),
        ),
        train(
            "algorithm attribute missing",
            "module 'scripted_lm' has no attribute 'SPEC'",
            _algorithm("scripted_lm:SPEC"),
        ),
        train(
            "algorithm reference not a spec",
            "is a function; expected AlgorithmSpec",
            _algorithm("scripted_lm:answer_lm"),
        ),
        train("algorithm reference half written", "module:attribute", _algorithm("my_search:")),
        train(
            "system kind module missing",
            "system.kind: cannot import module 'no_such_systems'",
            job(extra='[system]\nkind = "no_such_systems:KIND"\n'),
        ),
        train(
            "verifier kind not a kind",
            "expected VerifierKind",
            _verifier('kind = "scripted_lm:answer_lm"'),
        ),
        train(
            "verifier option of another kind",
            "unknown key 'verifier.abs_tol'",
            _verifier('kind = "exact"\nabs_tol = 0.1'),
        ),
        train(
            "regex verifier without a pattern",
            "missing required key 'verifier.pattern'",
            _verifier('kind = "regex"'),
        ),
    ]
