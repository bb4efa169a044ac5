"""Bad LM budgets (``[job.budget] lm_tokens`` and ``lm_cost_usd``, the limits over every
role's model calls together): each is one error line naming the limit, no job stored."""

from __future__ import annotations

from cases import PROGRAM, Case, job, train


def _budget(line: str) -> str:
    return job(extra=f"[job.budget]\n{line}\n") + PROGRAM


def rolebudgets_cases() -> list[Case]:
    """Every case of this file."""
    return [
        train("lm_tokens negative", "lm_tokens", _budget("lm_tokens = -100")),
        train("lm_tokens fractional", "lm_tokens", _budget("lm_tokens = 1500.5")),
        train("lm_tokens text", "lm_tokens", _budget('lm_tokens = "50k"')),
        train("lm_tokens infinite", "lm_tokens", _budget("lm_tokens = inf")),
        train("lm_cost_usd negative", "lm_cost_usd", _budget("lm_cost_usd = -0.5")),
        train("lm_cost_usd nan", "lm_cost_usd", _budget("lm_cost_usd = nan")),
        train("lm_cost_usd with a dollar sign", "lm_cost_usd", _budget('lm_cost_usd = "$2"')),
        train("lm token budget misspelt", "lm_token", _budget("lm_token = 5000")),
        train(
            "lm_cost_usd without a priced model",
            "lm_cost_usd: no model has a price",
            _budget("lm_cost_usd = 2.0"),
        ),
        Case(
            "lm_tokens flag not a number",
            ["train", "job.toml", "--set", "job.budget.lm_tokens=lots"],
            "job.budget.lm_tokens",
            {"job.toml": job() + PROGRAM},
        ),
    ]
