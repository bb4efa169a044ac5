"""MIPRO's designed trials: the seed's repair, then one change at a time, then the changes
that helped, together; TPE takes over when the design is spent.

TPE's own start is random draws, and a 100-400-call plan pays for 3 to 6 trials: a draw
changes every parameter at once, so a poor instruction can hide the demo set that would
have lifted, and no trial says which change did what. The design instead starts from a
base (the seed's repair, the seed with the restating answer stage, or the seed when no
stage has that layout) and changes one parameter of it per trial: one round, every
parameter at its first value in the prior's order. When the round is scored, the next
trial combines the changes that scored above the base (when two or more did). Every trial
is paired with the base on the same examples, so what a change is worth is read off its
own trial. One round only: changes that lift only together (an interaction) are TPE's to
find, with every designed trial in its history.

A parameter's values are tried in the order of a prior on what carries a lift, the same
for every task: demo sets chosen per input (``nearest``: retrieved demos are the strongest
few-shot choice in the in-context-learning literature), then the labeled set, bootstrapped
sets, and none last; the proposer's instructions before the operators' variants; layouts
in ``LAYOUT_RECIPES`` order, the seed's own (without the answer stage) last. A change whose
program a trial scored already is not tried again (a round may be shorter). The design is
a pure function of the checkpointed trials, so a resumed run picks what an uninterrupted
one would.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from emery.algorithms.mipro.state import MiproState, TrialRecord

DEMO_ORDER = ("nearest", "labeled", "bootstrapped", "warm", "original", "empty")
"""Demo-set kinds in the order the design tries them."""
INSTRUCTION_ORDER = ("proposed", "format_hint", "operator", "warm", "original")
"""Instruction sources in the order the design tries them."""


def repaired_seed_params(state: MiproState) -> dict[str, int] | None:
    """The seed's instructions and demos with each stage's first layout beyond the seed's
    (the restating answer stage), or None when no stage has such a layout. A seed that
    misses its output format, the commonest failure of a small model, is then repaired
    before any other change is tried."""
    params = dict.fromkeys(state.spaces(), 0)
    repaired = [f"{stage}.layout" for stage in state.stages if f"{stage}.layout" in params]
    for name in repaired:
        params[name] = 1
    return params if repaired else None


def base_params(state: MiproState) -> dict[str, int]:
    """What every designed change starts from: the seed's repair, else the seed."""
    return repaired_seed_params(state) or dict.fromkeys(state.spaces(), 0)


def value_order(state: MiproState, name: str) -> list[int]:
    """A parameter's values other than the base's, in the design's order."""
    stage, _, kind = name.rpartition(".")
    base = base_params(state)[name]
    values = [index for index in range(state.spaces()[name]) if index != base]
    if kind == "demos":
        sets = state.demo_sets.get(stage, [])
        return sorted(values, key=lambda i: DEMO_ORDER.index(sets[i].kind) if sets else i)
    if kind == "instruction":
        choices = state.instructions.get(stage, [])
        return sorted(
            values, key=lambda i: INSTRUCTION_ORDER.index(choices[i].source) if choices else i
        )
    return sorted(values, key=lambda i: (i < base, i))  # the seed's own layout last


def designed_trials(
    state: MiproState, identify: Callable[[Mapping[str, int]], str]
) -> list[dict[str, int]]:
    """The designed choices whose candidates (``identify``) no trial has scored, in order:
    the base, the rest of the current round's single changes, and, once a round is
    scored, its combination. Empty when the design is spent (TPE's turn)."""
    base = base_params(state)
    scored = {record.candidate_id for record in state.trials}
    if identify(base) not in scored:
        return [base]
    names = list(state.spaces())
    orders = {name: value_order(state, name) for name in names}
    singles = [{**base, name: orders[name][0]} for name in names if orders[name]]
    untried = [choice for choice in singles if identify(choice) not in scored]
    if untried:
        return untried
    combined = combination(state.trials, base)
    return [combined] if combined is not None and identify(combined) not in scored else []


def combination(trials: list[TrialRecord], base: Mapping[str, int]) -> dict[str, int] | None:
    """Every parameter at its best single-change value that scored above the base (None
    when fewer than two did: nothing to combine). Each choice is read at its first trial
    (a later full-val score of a promoted one is on other examples); the seed's baseline
    is never a change, only the base when no stage has a layout to repair."""
    names = list(base)
    first: dict[tuple[int, ...], TrialRecord] = {}
    for record in trials:
        if record.kind != "baseline":
            first.setdefault(_key(record.params, names), record)
    seed = next((record for record in trials if record.kind == "baseline"), None)
    base_record = first.get(_key(base, names)) or (
        seed if seed is not None and _key(seed.params, names) == _key(base, names) else None
    )
    if base_record is None:
        return None
    best: dict[str, tuple[float, int]] = {}
    for record in first.values():
        changed = [name for name in names if record.params.get(name, 0) != base[name]]
        if len(changed) != 1 or record.score <= base_record.score:
            continue
        name = changed[0]
        if name not in best or record.score > best[name][0]:
            best[name] = (record.score, record.params.get(name, 0))
    if len(best) < 2:
        return None
    return {**base, **{name: value for name, (_, value) in best.items()}}


def _key(params: Mapping[str, int], names: list[str]) -> tuple[int, ...]:
    return tuple(params.get(name, 0) for name in names)
