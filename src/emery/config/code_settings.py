"""Which settings of a job config make emery run code on the host that runs the job: the
user's own (``module:attr`` names, ``python/`` models and model providers, function agents,
python verifiers and judge scorings)
or code a model writes (harness loops, graph code nodes, replies run by ``code_tests``).

``emery server`` refuses a config posted over HTTP that has any, unless started with
``--allow-code``: such code runs with the server's permissions. Plug-ins named by an
installed entry point are the operator's and pass.
"""

from __future__ import annotations

from typing import Any

from emery.config.schema import JobConfig
from emery.systems.graph.spec import CodeNode, walk

ROLES = ("task", "reflection", "proposer", "judge")
CODE_SYSTEMS = {
    "function_agent": "a Python function of yours",
    "code_harness": "agent loop code a model writes",
}
CODE_VERIFIERS = {
    "python": "a Python function of yours",
    "code_tests": "the model's replies as code",
}
STRATEGY_SETTINGS = (
    "candidate_selection",
    "minibatch_sampler",
    "merge_policy",
    "operators",
    "acceptance",
    "operator_turns",
)
"""Algorithm settings that name plug-ins (GEPA's strategies): a ``module:attr`` is code."""


def code_settings(config: JobConfig) -> list[str]:
    """Each setting of ``config`` that runs code on the job's host, as ``key = value
    (what runs)``; empty when there is none."""
    found: list[str] = []
    for role in ROLES:
        lm = getattr(config.lm, role)
        if lm is not None and lm.model.startswith("python/"):
            found.append(f'lm.{role}.model = "{lm.model}" (a Python object of yours)')
        elif lm is not None and ":" in lm.model.partition("/")[0]:
            found.append(f'lm.{role}.model = "{lm.model}" (a model provider of yours)')
    if ":" in config.job.algorithm:
        found.append(f'job.algorithm = "{config.job.algorithm}" (a module of yours)')
    if ":" in config.runtime.executor:
        found.append(f'runtime.executor = "{config.runtime.executor}" (a module of yours)')
    if config.verifier is not None:
        kind = config.verifier.kind
        if kind in CODE_VERIFIERS or ":" in kind:
            what = CODE_VERIFIERS.get(kind, "a module of yours")
            found.append(f'verifier.kind = "{kind}" ({what})')
        scoring = str(getattr(config.verifier, "scoring", ""))
        if ":" in scoring:
            found.append(f'verifier.scoring = "{scoring}" (a judge scoring of yours)')
    if config.system is not None:
        found.extend(_system_code(config.system, config.job.algorithm))
    found.extend(_strategy_code(config.algorithm))
    return found


def _strategy_code(tables: dict[str, dict[str, Any]]) -> list[str]:
    """The ``module:attr`` names among the algorithm tables' strategy settings."""
    found = []
    for table, settings in sorted(tables.items()):
        for key in STRATEGY_SETTINGS:
            value = settings.get(key)
            for name in value if isinstance(value, list) else [value]:
                if isinstance(name, str) and ":" in name:
                    found.append(f'algorithm.{table}.{key} = "{name}" (a module of yours)')
    return found


def _system_code(system: Any, algorithm: str) -> list[str]:
    kind = str(getattr(system, "kind", ""))
    if kind in CODE_SYSTEMS or ":" in kind:
        return [f'system.kind = "{kind}" ({CODE_SYSTEMS.get(kind, "a module of yours")})']
    if kind != "graph":
        return []
    nodes = [node.name for node in walk(system.nodes) if isinstance(node, CodeNode)]
    if nodes:
        return [f"system: code nodes {', '.join(nodes)} (Python in the config)"]
    if algorithm == "graph_gepa":
        return ['job.algorithm = "graph_gepa" on a graph (its proposals may add code nodes)']
    return []
