"""Candidate lineage as text: a tree of who came from whom with scores, and text diffs.

Pure functions over candidates (any algorithm's), for ``emery candidates --tree`` and for
reports. A candidate with two parents (a merge) is drawn under its first parent and names
the other; a candidate whose parents are unknown is drawn as a root.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence

from emery.core.models import Candidate, Demo


def _label(
    candidate: Candidate,
    scores: Mapping[str, float | None],
    best_id: str | None,
    id_chars: int,
) -> str:
    lineage = candidate.lineage
    parts = [candidate.id[:id_chars], lineage.operation]
    if lineage.iteration is not None and lineage.operation != "seed":
        parts.append(f"it {lineage.iteration}")
    score = scores.get(candidate.id)
    parts.append("val —" if score is None else f"val {score:.3f}")
    if len(lineage.parents) > 1:
        parts.append("merge of " + " + ".join(p[:id_chars] for p in lineage.parents))
    if candidate.id == best_id:
        parts.append("★ best")
    return "  ".join(parts)


def lineage_tree(
    candidates: Sequence[Candidate],
    scores: Mapping[str, float | None] | None = None,
    *,
    best_id: str | None = None,
    id_chars: int = 8,
    only_scored: bool = False,
) -> str:
    """The candidates as an indented tree, children in the order given.

    ``scores`` maps candidate id → val score (candidates without one show "val —");
    ``only_scored`` leaves out unscored candidates (rejected proposals) whose subtree has
    no scored candidate.
    """
    scores = scores or {}
    by_id = {c.id: c for c in candidates}
    children: dict[str | None, list[str]] = {}
    for candidate in candidates:
        parents = [p for p in candidate.lineage.parents if p in by_id]
        children.setdefault(parents[0] if parents else None, []).append(candidate.id)

    def keep(candidate_id: str) -> bool:
        if not only_scored or scores.get(candidate_id) is not None:
            return True
        return any(keep(child) for child in children.get(candidate_id, []))

    lines: list[str] = []

    def draw(candidate_id: str, prefix: str, last: bool, root: bool) -> None:
        label = _label(by_id[candidate_id], scores, best_id, id_chars)
        lines.append(label if root else f"{prefix}{'└── ' if last else '├── '}{label}")
        below = [c for c in children.get(candidate_id, []) if keep(c)]
        inner = "" if root else prefix + ("    " if last else "│   ")
        for index, child in enumerate(below):
            draw(child, inner, index == len(below) - 1, False)

    for root in [c for c in children.get(None, []) if keep(c)]:
        draw(root, "", True, True)
    return "\n".join(lines)


def component_diff(
    before: Candidate | Mapping[str, str],
    after: Candidate | Mapping[str, str],
    *,
    context: int = 3,
    before_label: str = "seed",
    after_label: str = "best",
) -> str:
    """A unified diff per component that differs ("" when all components are equal); for
    candidates also per stage whose demos differ (``STAGE demos``: a line per demo)."""
    old, new = _texts(before), _texts(after)
    chunks: list[str] = []
    for name in sorted(set(old) | set(new)):
        a, b = old.get(name, ""), new.get(name, "")
        if a == b:
            continue
        diff = difflib.unified_diff(
            _lines(a),
            _lines(b),
            fromfile=f"{before_label}/{name}",
            tofile=f"{after_label}/{name}",
            n=context,
            lineterm="",
        )
        chunks.append("\n".join(diff))
    return "\n\n".join(chunks)


def _texts(side: Candidate | Mapping[str, str]) -> dict[str, str]:
    """The texts a diff compares: the components, and a candidate's demos per stage."""
    if not isinstance(side, Candidate):
        return dict(side)
    texts = dict(side.components)
    for stage, demos in side.demos.items():
        if demos:
            texts[f"{stage} demos"] = "\n".join(_demo_line(demo) for demo in demos)
    return texts


def _demo_line(demo: Demo) -> str:
    inputs = json.dumps(demo.inputs, ensure_ascii=False, sort_keys=True, default=str)
    return f"{inputs} → {json.dumps(demo.output, ensure_ascii=False)}"


def _lines(text: str) -> list[str]:
    """Lines of ``text``; a one-line text is split at sentence ends so diffs stay readable."""
    lines = text.splitlines() or [""]
    if len(lines) == 1 and len(text) > 100:
        sentences = [s for s in text.replace(". ", ".\n").splitlines() if s]
        return sentences or lines
    return lines
