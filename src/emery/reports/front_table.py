"""The cost front of a job result as a table and a sentence, for the text and HTML reports
(the dashboard draws the same columns from the result's JSON)."""

from __future__ import annotations

from emery.evaluation.front import CostFront, FrontMember

MAX_ROWS = 20
"""Front members shown (the winner and the search's best always are)."""

HEADER = ["candidate", "val", "tokens/example", "tokens by role", "LM calls", "seconds", "note"]


def front_members(front: CostFront) -> list[FrontMember]:
    """The front (cheapest first by tokens), with the winner and the search's best even
    when they are not on it, at most ``MAX_ROWS``."""
    keep = {front.winner_id, front.best_score_id}
    members = [m for m in front.candidates if m.on_front or m.candidate_id in keep]
    members.sort(key=lambda m: (m.cost.tokens, -m.score))
    marked = [m for m in members if m.candidate_id in keep]
    rest = [m for m in members if m.candidate_id not in keep][: MAX_ROWS - len(marked)]
    return [m for m in members if m in marked or m in rest]


def front_rows(front: CostFront) -> list[list[str]]:
    """One row per member shown, cells as ``HEADER`` names them."""
    rows = []
    for member in front_members(front):
        cost = member.cost
        roles = ", ".join(f"{role} {tokens:.0f}" for role, tokens in cost.tokens_by_role.items())
        rows.append(
            [
                member.candidate_id[:12],
                f"{member.score:.1%}",
                f"{cost.tokens:.0f}",
                roles or "-",
                f"{cost.lm_calls:.2f}",
                f"{cost.latency_s:.2f}",
                _note(front, member),
            ]
        )
    return rows


def _note(front: CostFront, member: FrontMember) -> str:
    notes = []
    if member.candidate_id == front.winner_id:
        notes.append("chosen")
    if member.candidate_id == front.best_score_id:
        notes.append("best score")
    if not member.on_front:
        notes.append("not on the front")
    return ", ".join(notes)


def front_sentence(front: CostFront) -> str:
    """What the rule chose, against the search's best: ``select cheapest_within:0.02 chose
    ab12…: 480 tokens per example, 38% fewer than the best score's cd34… (val 61.0% vs
    62.0%)``."""
    winner, best = front.member(front.winner_id), front.member(front.best_score_id)
    head = f"select {front.select} over {', '.join(front.objectives)}"
    if winner is None or best is None:
        return head
    if winner.candidate_id == best.candidate_id:
        return f"{head} chose the best-score candidate {best.candidate_id[:12]}"
    text = f"{head} chose {winner.candidate_id[:12]}: {winner.cost.tokens:.0f} tokens per example"
    if best.cost.tokens > 0:
        saved = 1 - winner.cost.tokens / best.cost.tokens
        text += f", {abs(saved):.0%} {'fewer' if saved >= 0 else 'more'} than"
    else:
        text += ", against"
    return (
        text + f" the best score's {best.candidate_id[:12]}"
        f" (val {winner.score:.1%} vs {best.score:.1%})"
    )
