"""The stop policy: the algorithm's own end, then budget limits, then requests from outside."""

from __future__ import annotations

from emery.algorithms.base import AlgorithmState
from emery.algorithms.stopping import StopPolicy
from emery.evaluation.budget import Budget, BudgetConfig
from emery.lm.usage import UsageMeter


def budget(metric_calls: int | None = None, used: int = 0) -> Budget:
    tracked = Budget(BudgetConfig(metric_calls=metric_calls), UsageMeter())
    tracked.usage.metric_calls = used
    return tracked


def test_a_search_goes_on_until_something_says_stop() -> None:
    assert StopPolicy(budget(10, used=3)).reason(AlgorithmState()) is None
    assert StopPolicy(budget(), lambda: None).reason(AlgorithmState()) is None


def test_the_algorithms_own_end_comes_first_then_the_budget_then_requests() -> None:
    done = AlgorithmState(done=True, done_reason="nothing left to try")
    spent = budget(10, used=10)
    assert StopPolicy(spent, lambda: "pause").reason(done) == "nothing left to try"
    assert StopPolicy(budget(), None).reason(AlgorithmState(done=True)) == "converged"
    assert StopPolicy(spent, lambda: "pause").reason(AlgorithmState()) == (
        "metric_calls: 10 of 10 used"
    )
    assert StopPolicy(budget(10, used=3), lambda: "pause").reason(AlgorithmState()) == "pause"


def test_a_step_the_budget_could_not_pay_for_ends_the_search_on_metric_calls() -> None:
    assert StopPolicy(budget(10, used=8)).out_of_budget() == "metric_calls"
    assert StopPolicy(budget(10, used=10)).out_of_budget() == "metric_calls: 10 of 10 used"
