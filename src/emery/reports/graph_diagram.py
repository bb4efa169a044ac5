"""A workflow graph as an inline SVG: a layered box diagram, data flowing left to right.

Each column is a layer (``render.layers``): the input fields first, then each node one
column after the deepest node it reads; an arrow per edge. A map node is one box.
"""

from __future__ import annotations

from html import escape

from emery.systems.graph.render import edges, layers
from emery.systems.graph.spec import GraphConfig, LLMNode, MapNode, Node

BOX_W, BOX_H, GAP_X, GAP_Y, PAD = 170, 44, 60, 18, 12
FILL = {"input": "#f2f2f2", "llm": "#ddeeff", "code": "#e8f5e0", "map": "#fff2d6"}


def _label(node: Node | None) -> str:
    if node is None:
        return "input"
    if isinstance(node, LLMNode):
        return "llm" + (f" ×{node.samples}" if node.samples > 1 else "")
    if isinstance(node, MapNode):
        return f"map over {node.over}"
    return node.kind


def graph_svg(graph: GraphConfig) -> str:
    """``graph``'s top scope as an ``<svg>`` element (no script, no external reference)."""
    columns = layers(graph.nodes)
    by_name = {node.name: node for node in graph.nodes}
    place: dict[str, tuple[int, int]] = {}
    for col, names in enumerate(columns):
        for row, name in enumerate(names):
            place[name] = (PAD + col * (BOX_W + GAP_X), PAD + row * (BOX_H + GAP_Y))
    width = PAD * 2 + len(columns) * BOX_W + (len(columns) - 1) * GAP_X
    rows = max(len(names) for names in columns)
    height = PAD * 2 + rows * BOX_H + (rows - 1) * GAP_Y
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="graph" width="{width}"'
        f' height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7"'
        ' markerHeight="7" orient="auto"><path d="M0,0L10,5L0,10z" fill="#555"/></marker>'
        "</defs>",
    ]
    for source, target in edges(graph.nodes):
        (x1, y1), (x2, y2) = place[source], place[target]
        parts.append(
            f'<line x1="{x1 + BOX_W}" y1="{y1 + BOX_H // 2}" x2="{x2}" y2="{y2 + BOX_H // 2}"'
            ' stroke="#555" marker-end="url(#arrow)"/>'
        )
    for name, (x, y) in place.items():
        node = by_name.get(name)
        kind = _label(node)
        fill = FILL.get("input" if node is None else node.kind, "#eeeeee")
        parts.append(
            f"<g><title>{escape(name)} ({escape(kind)})</title>"
            f'<rect x="{x}" y="{y}" width="{BOX_W}" height="{BOX_H}" rx="6" fill="{fill}"'
            ' stroke="#888"/>'
            f'<text x="{x + BOX_W // 2}" y="{y + 18}" text-anchor="middle" font-size="13"'
            f' font-weight="600">{escape(name)}</text>'
            f'<text x="{x + BOX_W // 2}" y="{y + 34}" text-anchor="middle" font-size="11"'
            f' fill="#555">{escape(kind)}</text></g>'
        )
    parts.append("</svg>")
    return "".join(parts)
