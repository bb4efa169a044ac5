"""Accepting a child that is as good as its parent and cheaper, when the job names costs.

With a cost among ``[job] objectives`` (``ctx.objectives``), a search that keeps only
children shown better would never reach val with a cheaper child of equal quality (a
shorter prompt that answers the same), and the job's ``select`` rule could not choose it.
Such a child is accepted too: on the examples it was judged on it is not shown worse and
not behind its parent (the same evidence as ``accept = "improvement_or_equal"``), and its
mean cost per example there is no higher on every cost named and lower on one.
"""

from __future__ import annotations

from collections.abc import Sequence

from emery.algorithms.evidence import Evidence
from emery.evaluation.eval_result import EvalResult
from emery.evaluation.objectives import cost_per_example, named_costs


def as_good_and_cheaper(
    objectives: Sequence[str], before: EvalResult, after: EvalResult, evidence: Evidence | None
) -> bool:
    """Whether the child (``after``) is as good as its parent (``before``, on the same
    examples) and cheaper on the costs among ``objectives`` (module doc); False when none
    is named."""
    costs = named_costs(objectives)
    if not costs:
        return False
    if evidence is None:
        if after.total < before.total:
            return False
    elif evidence.verdict == "worse" or evidence.difference < 0:
        return False
    mine, theirs = cost_per_example(after.results), cost_per_example(before.results)
    pairs = [(mine.value(name), theirs.value(name)) for name in costs]
    return all(m <= t for m, t in pairs) and any(m < t for m, t in pairs)
