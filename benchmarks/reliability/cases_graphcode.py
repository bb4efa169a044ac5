"""Corpus cases: graph code nodes whose source compiles as a syntax tree but not as a
module. Config checks compile code nodes and never execute them, so these are the code
node errors a config check can report (what a module does when it runs is its rollout's
error, at run time)."""

from __future__ import annotations

from cases import Case, job, train


def graph_with_code(source: str) -> str:
    """A graph system: an llm node answering ``question``, then a code node ``check``
    whose module is ``source``, giving the output."""
    quoted = source.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return (
        '[system]\nkind = "graph"\n'
        '[[system.nodes]]\nname = "answer"\n'
        'messages = [{ role = "user", template = "{question}" }]\n'
        f'[[system.nodes]]\nkind = "code"\nname = "check"\nsource = "{quoted}"\n'
        '[[system.nodes]]\nkind = "output"\nvalue = "check"\n'
    )


def graphcode_cases() -> list[Case]:
    """Code node modules that do not compile (``ast.parse`` alone accepts them)."""
    function = "def check(answer):\n    return answer\n"
    return [
        train(
            "graph: code node returns outside a function",
            "code node 'check': syntax error on line 1: 'return' outside function",
            job() + graph_with_code("return 1\n" + function),
        ),
        train(
            "graph: code node awaits outside a function",
            "code node 'check': syntax error on line 1: 'await' outside function",
            job() + graph_with_code("await check(1)\n" + function),
        ),
    ]
