"""LM-free structural mutations of a graph spec: the structural edits a graph offers
(``GraphSystem.structure_edits``, the ``MutatesStructure`` capability) to ``graph_gepa``.

Each template edits the scope of a parent graph that holds one of its llm nodes
(``target``): the top level, or the sub-graph of the map node the target is in (node names
are unique in the whole graph, so the target names its scope). It returns the edits that
apply (none when it does not):

- ``answer``: the target reasons freely (raw parser) and a new node reads its reasoning
  and gives the answer in the target's format (extract → answer);
- ``check``: a new node checks the target's reply and another revises it (solve → check →
  revise), in the target's format; the revision replaces the target's value for its readers;
- ``plan``: a new node writes a plan that the target reads (plan → solve);
- ``vote``: the target samples ``samples`` replies and answers with the most common one;
- ``merge``: the one llm node the target reads (and nothing else does) is folded into
  the target: its instruction first, its input lines in the target's template;
- ``remove``: the target is dropped; its readers read what it read instead (or lose the
  lines that showed its value), and nodes left unread are dropped too;
- ``rewire``: the target also reads the value of another llm node;
- ``fewer_tokens`` / ``more_tokens``: halve (or set) / double the target's ``max_tokens``.

Templates only edit: whether the result is a valid graph (acyclic, every input bound) is
checked by the graph's own validation, of the whole graph, before any rollout. An llm
node's model ``role`` is not mutated: ``task`` is the only role a node may have. A mutation
inside a map's sub-graph changes that sub-graph only (it reads and rewires the nodes of
that scope), so a check or answer node added there runs once per item.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from emery.systems.capabilities import StructureEdit as Structure
from emery.systems.graph.spec import GraphConfig, MapNode, Node, OutputNode, walk

ANSWER_TEXT = "Read the reasoning below and give the final answer to the task."
CHECK_TEXT = (
    "Check the proposed answer to the task below step by step."
    " Say what is wrong with it, or that it is right."
)
REVISE_TEXT = (
    "Give the final answer to the task below: keep the proposed answer if the review found"
    " it right, otherwise correct it."
)
PLAN_TEXT = "Write a short numbered plan for solving the task below. Do not solve it."
VOTE_TEMPERATURE = 0.7
DEFAULT_MAX_TOKENS = 512
MIN_TOKENS, MAX_TOKENS = 16, 4096


@dataclass(frozen=True)
class Parent:
    """The graph a structural child is made from: its spec dict, the parsed graph, the
    candidate's components (instructions), and names no new node may take."""

    spec: dict[str, Any]
    graph: GraphConfig
    components: Mapping[str, str]
    taken: frozenset[str]
    samples: int = 3


Template = Callable[[Parent, str], list[Structure]]


def _nodes(spec: dict[str, Any]) -> list[dict[str, Any]]:
    nodes: list[dict[str, Any]] = spec["nodes"]
    return nodes


def _node(spec: dict[str, Any], name: str) -> dict[str, Any]:
    return next(node for node in _nodes(spec) if node["name"] == name)


def scope_path(graph: GraphConfig, target: str) -> tuple[str, ...]:
    """The map nodes, outermost first, whose sub-graph holds ``target``; () at top level."""

    def find(nodes: list[Node], path: tuple[str, ...]) -> tuple[str, ...] | None:
        for node in nodes:
            if node.name == target:
                return path
            if isinstance(node, MapNode):
                found = find(node.nodes, (*path, node.name))
                if found is not None:
                    return found
        return None

    return find(graph.nodes, ()) or ()


def _scope(parent: Parent, spec: dict[str, Any], target: str) -> dict[str, Any]:
    """The part of ``spec`` (itself, or a map node's dict) whose ``nodes`` hold ``target``."""
    for name in scope_path(parent.graph, target):
        spec = _node(spec, name)
    return spec


def _path_nodes(graph: GraphConfig, path: tuple[str, ...]) -> list[Node]:
    """The parsed nodes of the scope at ``path`` (map node names, outermost first)."""
    nodes = graph.nodes
    for name in path:
        found = next(node for node in nodes if node.name == name)
        assert isinstance(found, MapNode)
        nodes = found.nodes
    return nodes


def _scope_nodes(parent: Parent, target: str) -> list[Node]:
    """The parsed nodes of the scope that holds ``target``."""
    return _path_nodes(parent.graph, scope_path(parent.graph, target))


def _free(parent: Parent, base: str) -> str:
    """``base``, numbered until no node or input field has the name."""
    names = parent.taken | {node.name for node in walk(parent.graph.nodes)}
    name, number = base, 1
    while name in names:
        number += 1
        name = f"{base}_{number}"
    return name


def _reads(parent: Parent, name: str) -> dict[str, set[str]]:
    """Node of ``name``'s scope → the local names it binds to the source ``name``."""
    out: dict[str, set[str]] = {}
    for node in _scope_nodes(parent, name):
        local = {k for k, v in node.sources(parent.components).items() if v == name}
        if local:
            out[node.name] = local
    return out


def _rebind(parent: Parent, spec: dict[str, Any], old: str, new: str, skip: set[str]) -> None:
    """Every reader of ``old`` in ``spec`` (its scope; except ``skip``) reads ``new``."""
    for reader, local_names in _reads(parent, old).items():
        if reader in skip:
            continue
        node = _node(spec, reader)
        if node.get("kind") == "output":
            node["value"] = new
            node.get("inputs", {}).pop(old, None)
            continue
        inputs = node.setdefault("inputs", {})
        for local in local_names:
            inputs[local] = new


def _with_line(node: dict[str, Any], text: str) -> list[dict[str, Any]]:
    """The node's messages with ``text`` appended to the last one's template."""
    messages: list[dict[str, Any]] = copy.deepcopy(node["messages"])
    messages[-1]["template"] = messages[-1]["template"].rstrip() + text
    return messages


def _llm(name: str, like: dict[str, Any], messages: list[dict[str, Any]]) -> dict[str, Any]:
    """A new llm node reading what ``like`` reads, with a raw reply unless told otherwise."""
    return {
        "kind": "llm",
        "name": name,
        "messages": messages,
        "inputs": dict(like.get("inputs", {})),
        "parser": {"kind": "raw"},
    }


def _insert(spec: dict[str, Any], anchor: str, *new: dict[str, Any], after: bool = True) -> None:
    """Insert ``new`` nodes after (or before) the node ``anchor``."""
    nodes = _nodes(spec)
    index = next(i for i, node in enumerate(nodes) if node["name"] == anchor)
    nodes[index + int(after) : index + int(after)] = list(new)


def answer(parent: Parent, target: str) -> list[Structure]:
    """The target reasons freely; a new node reads its reasoning and answers."""
    spec = copy.deepcopy(parent.spec)
    scope = _scope(parent, spec, target)
    node = _node(scope, target)
    name = _free(parent, f"{target}_answer")
    added = _llm(name, node, _with_line(node, f"\n\nReasoning:\n{{{target}}}"))
    added["parser"] = node.get("parser", {"kind": "raw"})
    _rebind(parent, scope, target, name, skip=set())
    node["parser"] = {"kind": "raw"}
    _insert(scope, target, added)
    return [Structure(spec, {name: ANSWER_TEXT})]


def check(parent: Parent, target: str) -> list[Structure]:
    """A check node and a revise node after the target; readers read the revision."""
    spec = copy.deepcopy(parent.spec)
    scope = _scope(parent, spec, target)
    node = _node(scope, target)
    checker, reviser = _free(parent, f"{target}_check"), _free(parent, f"{target}_revise")
    shown = f"\n\nProposed answer:\n{{{target}}}"
    checks = _llm(checker, node, _with_line(node, shown))
    revises = _llm(reviser, node, _with_line(node, f"{shown}\n\nReview:\n{{{checker}}}"))
    revises["parser"] = node.get("parser", {"kind": "raw"})
    _rebind(parent, scope, target, reviser, skip=set())
    node["parser"] = {"kind": "raw"}  # the whole proposed reply is checked
    _insert(scope, target, checks, revises)
    return [Structure(spec, {checker: CHECK_TEXT, reviser: REVISE_TEXT})]


def plan(parent: Parent, target: str) -> list[Structure]:
    """A plan node before the target, whose user turn shows the plan."""
    spec = copy.deepcopy(parent.spec)
    scope = _scope(parent, spec, target)
    node = _node(scope, target)
    name = _free(parent, f"{target}_plan")
    planner = _llm(name, node, copy.deepcopy(node["messages"]))
    node["messages"] = _with_line(node, f"\n\nPlan:\n{{{name}}}")
    _insert(scope, target, planner, after=False)
    return [Structure(spec, {name: PLAN_TEXT})]


def vote(parent: Parent, target: str) -> list[Structure]:
    """The target samples ``parent.samples`` replies and keeps the most common answer."""
    spec = copy.deepcopy(parent.spec)
    node = _node(_scope(parent, spec, target), target)
    if node.get("samples", 1) > 1:
        return []
    node["samples"] = parent.samples
    node["temperature"] = node.get("temperature") or VOTE_TEMPERATURE
    return [Structure(spec)]


def _upstream(parent: Parent, target: str) -> list[str]:
    """The llm nodes of its scope that ``target`` reads, in dependency order."""
    nodes = _scope_nodes(parent, target)
    node = next(n for n in nodes if n.name == target)
    read = set(node.sources(parent.components).values()) & {n.name for n in nodes}
    return [n.name for n in parent.graph.llm_nodes() if n.name in read and n.name != target]


def _unread(parent: Parent, spec: dict[str, Any], target: str) -> list[str]:
    """``target`` and, dropped one after another, the non-output nodes of its scope that
    nothing reads (as long as ``spec`` parses: an invalid one is left to the validation)."""
    removed, path = [target], scope_path(parent.graph, target)
    while True:
        try:
            graph = GraphConfig.model_validate(spec)
        except ValueError:
            return removed
        nodes = _path_nodes(graph, path)
        read = {s for node in nodes for s in node.sources(parent.components).values()}
        dead = {n.name for n in nodes if not isinstance(n, OutputNode)} - read
        if not dead:
            return removed
        scope = _scope(parent, spec, target)
        scope["nodes"] = [n for n in _nodes(scope) if n["name"] not in dead]
        removed += sorted(dead)


def _drop_lines(node: dict[str, Any], placeholders: set[str]) -> None:
    """Drop the template lines that show one of ``placeholders`` (and their label line)."""
    for message in node["messages"]:
        kept: list[str] = []
        for line in message["template"].split("\n"):
            if not any(f"{{{name}}}" in line for name in placeholders):
                kept.append(line)
                continue
            while kept and (kept[-1].rstrip().endswith(":") or not kept[-1].strip()):
                kept.pop()
        message["template"] = "\n".join(kept).strip("\n")


def remove(parent: Parent, target: str) -> list[Structure]:
    """The target dropped (its readers bypass it or lose its lines), unread nodes too."""
    spec = copy.deepcopy(parent.spec)
    scope = _scope(parent, spec, target)
    upstream = _upstream(parent, target)
    if upstream:
        _rebind(parent, scope, target, upstream[-1], skip={target})
    else:
        readers = _reads(parent, target)
        kinds = {_node(scope, reader).get("kind", "llm") for reader in readers}
        if not readers or kinds != {"llm"}:
            return []
        for reader, local in readers.items():
            _drop_lines(_node(scope, reader), local)
    scope["nodes"] = [n for n in _nodes(scope) if n["name"] != target]
    return [Structure(spec, removed=tuple(_unread(parent, spec, target)))]


def merge(parent: Parent, target: str) -> list[Structure]:
    """The one llm node only the target reads, folded into the target."""
    upstream = _upstream(parent, target)
    if not upstream or set(_reads(parent, upstream[-1])) != {target}:
        return []
    folded = upstream[-1]
    spec = copy.deepcopy(parent.spec)
    scope = _scope(parent, spec, target)
    node, other = _node(scope, target), _node(scope, folded)
    inputs, extra = node.setdefault("inputs", {}), other.get("inputs", {})
    if any(inputs.get(k, v) != v for k, v in extra.items()):
        return []
    inputs.update(extra)
    _drop_lines(node, _reads(parent, folded)[target])
    present = "\n".join(m["template"] for m in node["messages"])
    lines = [ln for m in other["messages"] for ln in m["template"].split("\n")]
    new = [ln for ln in lines if ln.strip() and ln not in present]
    last = node["messages"][-1]
    last["template"] = "\n".join([*new, last["template"]]).strip("\n")
    scope["nodes"] = [n for n in _nodes(scope) if n["name"] != folded]
    texts = [parent.components.get(folded, ""), parent.components.get(target, "")]
    return [Structure(spec, {target: "\n".join(t for t in texts if t.strip())}, (folded,))]


def rewire(parent: Parent, target: str) -> list[Structure]:
    """One child per other llm node of its scope the target does not read yet: it reads it."""
    read = set(_reads_of(parent, target))
    scope_names = {node.name for node in _scope_nodes(parent, target)}
    out = []
    for other in parent.graph.llm_nodes():
        if other.name == target or other.name in read or other.name not in scope_names:
            continue
        spec = copy.deepcopy(parent.spec)
        node = _node(_scope(parent, spec, target), target)
        node["messages"] = _with_line(node, f"\n\n{other.name}:\n{{{other.name}}}")
        out.append(Structure(spec))
    return out


def _reads_of(parent: Parent, target: str) -> list[str]:
    node = next(n for n in _scope_nodes(parent, target) if n.name == target)
    return list(node.sources(parent.components).values())


def _tokens(change: Callable[[int | None], int | None]) -> Template:
    def edit(parent: Parent, target: str) -> list[Structure]:
        spec = copy.deepcopy(parent.spec)
        node = _node(_scope(parent, spec, target), target)
        new = change(node.get("max_tokens"))
        if new is None or new == node.get("max_tokens"):
            return []
        node["max_tokens"] = new
        return [Structure(spec)]

    return edit


def _fewer(tokens: int | None) -> int | None:
    return DEFAULT_MAX_TOKENS // 2 if tokens is None else max(MIN_TOKENS, tokens // 2)


def _more(tokens: int | None) -> int | None:
    return None if tokens is None else min(MAX_TOKENS, tokens * 2)


# The order is the order in which a parent's structural children are offered.
TEMPLATES: dict[str, Template] = {
    "answer": answer,
    "check": check,
    "plan": plan,
    "vote": vote,
    "merge": merge,
    "remove": remove,
    "rewire": rewire,
    "fewer_tokens": _tokens(_fewer),
    "more_tokens": _tokens(_more),
}


def targets(graph: GraphConfig) -> list[str]:
    """Every llm node, those of map sub-graphs included, the one nearest the output first
    (a map's sub-graph nodes come before the nodes the map reads)."""
    return [node.name for node in reversed(graph.llm_nodes())]


def structure_edits(
    graph: GraphConfig,
    spec: dict[str, Any],
    components: Mapping[str, str],
    fields: set[str],
    samples: int,
) -> Iterator[tuple[str, Structure]]:
    """``<template>@<node>#<n>`` and the edit, for every template and llm node of ``graph``
    (``spec`` its JSON; a node of a map's sub-graph is ``<map>/<node>``: the edit changes
    that sub-graph)."""
    base = Parent(
        spec=spec, graph=graph, components=components, taken=frozenset(fields), samples=samples
    )
    for target in targets(graph):
        where = "/".join((*scope_path(graph, target), target))
        for name, template in TEMPLATES.items():
            for number, edit in enumerate(template(base, target)):
                yield f"{name}@{where}#{number}", edit
