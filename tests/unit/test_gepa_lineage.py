"""The lineage tree and component diffs GEPA's candidates are shown with."""

from __future__ import annotations

from emery.algorithms.lineage import component_diff, lineage_tree
from emery.core.models import Candidate, Demo, Lineage


def candidate(text: str, *parents: Candidate, operation: str = "reflect", it: int = 1) -> Candidate:
    return Candidate(
        components={"solve": text},
        lineage=Lineage(
            parents=tuple(p.id for p in parents),
            generation=1 if parents else 0,
            operation=operation if parents else "seed",
            iteration=it,
        ),
    )


def test_tree_draws_children_under_parents_with_scores_and_the_best() -> None:
    seed = candidate("Answer.")
    a = candidate("Answer. Use Answer: N.", seed, it=1)
    b = candidate("Answer. Multiply groups.", seed, it=2)
    c = candidate("Answer. Use Answer: N. Multiply groups.", a, b, operation="merge", it=3)
    rejected = candidate("Answer. Nonsense.", a, it=4)
    scores = {seed.id: 0.0, a.id: 0.4, b.id: 0.2, c.id: 0.9}
    tree = lineage_tree([seed, a, b, c, rejected], scores, best_id=c.id)
    lines = tree.splitlines()
    assert lines[0] == f"{seed.id[:8]}  seed  val 0.000"
    assert lines[1] == f"├── {a.id[:8]}  reflect  it 1  val 0.400"
    assert lines[2].startswith(f"│   ├── {c.id[:8]}  merge  it 3  val 0.900  merge of")
    assert lines[2].endswith("★ best")
    assert lines[3] == f"│   └── {rejected.id[:8]}  reflect  it 4  val —"
    assert lines[4] == f"└── {b.id[:8]}  reflect  it 2  val 0.200"
    short = lineage_tree([seed, a, b, c, rejected], scores, only_scored=True)
    assert rejected.id[:8] not in short
    assert c.id[:8] in short


def test_orphans_are_roots() -> None:
    seed = candidate("Answer.")
    child = candidate("Answer better.", seed)
    assert lineage_tree([child]).startswith(child.id[:8])


def test_component_diff_shows_only_changed_components() -> None:
    seed = Candidate(components={"a": "Same.", "b": "Answer the question."})
    best = Candidate(
        components={"a": "Same.", "b": "Answer the question.\nEnd with 'Answer: <number>'."}
    )
    diff = component_diff(seed, best)
    assert "--- seed/b" in diff
    assert "+++ best/b" in diff
    assert "+End with 'Answer: <number>'." in diff
    assert "seed/a" not in diff
    assert component_diff(seed, seed) == ""
    long_old = "First sentence here. " * 6
    long_new = long_old + "A new rule."
    assert "+A new rule." in component_diff({"x": long_old}, {"x": long_new})


def test_component_diff_shows_a_stage_whose_demos_changed() -> None:
    served = Candidate(components={"route": "Pick one."})
    demo = Demo(inputs={"query": "book a table"}, output="book")
    with_demos = Candidate(components={"route": "Pick one."}, demos={"route": (demo,)})
    diff = component_diff(served, with_demos, before_label="v1", after_label="candidate")
    assert "--- v1/route demos" in diff
    assert '+{"query": "book a table"} → "book"' in diff
    assert "route\n" not in diff  # the unchanged instruction is not shown
    assert component_diff(with_demos, with_demos) == ""
