"""What a plug-in author imports: the contracts of algorithms, system kinds, verifier kinds,
executors, model providers, judge scorings, harness environments and GEPA's strategies,
with the models and events they use.

A plug-in is named in a config as a built-in name, as ``"module:attr"`` or by an entry
point (``docs/plugins.md``). Import from here rather than from emery's inner modules: this
module is the surface kept stable for plug-ins; the modules behind it may move.

- an algorithm: ``AlgorithmSpec(name, settings, factory)``, named by ``[job] algorithm``;
- a system kind: ``SystemKind(name, config, build)``, by ``[system] kind``;
- a verifier kind: ``VerifierKind(name, config, build)``, by ``[verifier] kind``;
- an executor: ``ExecutorKind(build, elsewhere, available)``, by ``[runtime] executor``;
- a model provider: ``ProviderKind(name, build, priced)``, by the ``<provider>/`` prefix of
  ``[lm.<role>] model`` (``"<module>:<attr>/<name>"``);
- a judge scoring: a ``JudgeScoring`` (``name``, ``params``, ``messages``, ``verdict``), by
  ``[verifier] scoring``;
- a code-harness environment: a class or function making an ``Environment``, by
  ``[system] environment``;
- a GEPA parent selector: ``SelectorKind(name, build)``, by ``[algorithm.gepa]
  candidate_selection``;
- a GEPA minibatch sampler: ``SamplerKind(name, build)``, by ``[algorithm.gepa]
  minibatch_sampler``;
- a GEPA merge policy: ``MergeKind(name, build)``, by ``[algorithm.gepa] merge_policy``;
- a GEPA acceptance rule: ``AcceptanceKind(name, build)`` building an ``AcceptanceRule``
  (its verdict on a child's ``Evidence``), by ``[algorithm.gepa] acceptance``;
- an edit operator: ``OperatorKind(name, edit, cuts_cost)``, by ``[algorithm.gepa]
  operators``;
- a GEPA turn policy: ``TurnKind(name, build)`` building a ``TurnPolicy`` (which
  iterations go to the edit operators, from each source's ``SourceRecord`` in the
  ``TurnState``), by ``[algorithm.gepa] operator_turns``;
- an event of its own: a ``Payload`` with a ``kind``, passed to ``register_payload``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from emery.core.lazy import lazy_exports

if TYPE_CHECKING:
    from emery.algorithms.base import (
        Algorithm,
        AlgorithmSettings,
        AlgorithmState,
        SearchContext,
        load_rng,
        save_rng,
    )
    from emery.algorithms.gepa.acceptance import AcceptanceKind, AcceptanceRule
    from emery.algorithms.gepa.batches import MinibatchSampler, SamplerKind
    from emery.algorithms.gepa.merge import MergeKind, MergePlan, MergePolicy, find_merge
    from emery.algorithms.gepa.selection import ParentSelector, SelectorKind
    from emery.algorithms.gepa.settings import GepaSettings
    from emery.algorithms.gepa.state import GepaState, PoolEntry
    from emery.algorithms.gepa.turns import SourceRecord, TurnKind, TurnPolicy, TurnState
    from emery.algorithms.operators import Edit, Materials, OperatorKind
    from emery.algorithms.registry import AlgorithmSpec
    from emery.algorithms.sources import text_components
    from emery.core.example_result import ExampleResult
    from emery.core.models import Candidate, ChatMessage, Demo, Example, Lineage
    from emery.core.payloads import (
        BaselineEvaluated,
        BestUpdated,
        CandidateEvaluated,
        CandidateProposed,
        Payload,
        register_payload,
    )
    from emery.core.search_events import Evidence
    from emery.evaluation.eval_result import EvalResult
    from emery.evaluation.executor import Executor, LocalExecutor, RolloutHost
    from emery.lm.base import LM, Completion
    from emery.lm.config import LMConfig, ProviderKind
    from emery.systems.base import RunContext, System
    from emery.systems.harness.environment import Environment
    from emery.systems.harness.observation import Observation
    from emery.systems.registry import SystemKind
    from emery.systems.stages import StageConfig
    from emery.verifiers.base import Verdict, Verifier
    from emery.verifiers.config import VerifierConfig, VerifierKind
    from emery.verifiers.judge import JudgeReplyError, JudgeScoring, JudgeVerifier
    from emery.workers.executors import ExecutorKind, ExecutorSetup

_HOMES = {
    "emery.algorithms.base": (
        "Algorithm",
        "AlgorithmSettings",
        "AlgorithmState",
        "SearchContext",
        "load_rng",
        "save_rng",
    ),
    "emery.algorithms.gepa.acceptance": ("AcceptanceKind", "AcceptanceRule"),
    "emery.algorithms.gepa.batches": ("MinibatchSampler", "SamplerKind"),
    "emery.algorithms.gepa.merge": ("MergeKind", "MergePlan", "MergePolicy", "find_merge"),
    "emery.algorithms.gepa.selection": ("ParentSelector", "SelectorKind"),
    "emery.algorithms.gepa.settings": ("GepaSettings",),
    "emery.algorithms.gepa.state": ("GepaState", "PoolEntry"),
    "emery.algorithms.gepa.turns": ("SourceRecord", "TurnKind", "TurnPolicy", "TurnState"),
    "emery.algorithms.operators": ("Edit", "Materials", "OperatorKind"),
    "emery.algorithms.registry": ("AlgorithmSpec",),
    "emery.algorithms.sources": ("text_components",),
    "emery.core.models": ("Candidate", "ChatMessage", "Demo", "Example", "Lineage"),
    "emery.core.payloads": (
        "BaselineEvaluated",
        "BestUpdated",
        "CandidateEvaluated",
        "CandidateProposed",
        "Payload",
        "register_payload",
    ),
    "emery.core.example_result": ("ExampleResult",),
    "emery.core.search_events": ("Evidence",),
    "emery.evaluation.executor": ("Executor", "LocalExecutor", "RolloutHost"),
    "emery.evaluation.eval_result": ("EvalResult",),
    "emery.lm.base": ("LM", "Completion"),
    "emery.lm.config": ("LMConfig", "ProviderKind"),
    "emery.systems.base": ("RunContext", "System"),
    "emery.systems.harness.environment": ("Environment",),
    "emery.systems.harness.observation": ("Observation",),
    "emery.systems.registry": ("SystemKind",),
    "emery.systems.stages": ("StageConfig",),
    "emery.verifiers.base": ("Verdict", "Verifier"),
    "emery.verifiers.config": ("VerifierConfig", "VerifierKind"),
    "emery.verifiers.judge": ("JudgeReplyError", "JudgeScoring", "JudgeVerifier"),
    "emery.workers.executors": ("ExecutorKind", "ExecutorSetup"),
}

__getattr__, __dir__ = lazy_exports(
    __name__, {name: module for module, names in _HOMES.items() for name in names}
)

__all__ = [
    "LM",
    "AcceptanceKind",
    "AcceptanceRule",
    "Algorithm",
    "AlgorithmSettings",
    "AlgorithmSpec",
    "AlgorithmState",
    "BaselineEvaluated",
    "BestUpdated",
    "Candidate",
    "CandidateEvaluated",
    "CandidateProposed",
    "ChatMessage",
    "Completion",
    "Demo",
    "Edit",
    "Environment",
    "EvalResult",
    "Evidence",
    "Example",
    "ExampleResult",
    "Executor",
    "ExecutorKind",
    "ExecutorSetup",
    "GepaSettings",
    "GepaState",
    "JudgeReplyError",
    "JudgeScoring",
    "JudgeVerifier",
    "LMConfig",
    "Lineage",
    "LocalExecutor",
    "Materials",
    "MergeKind",
    "MergePlan",
    "MergePolicy",
    "MinibatchSampler",
    "Observation",
    "OperatorKind",
    "ParentSelector",
    "Payload",
    "PoolEntry",
    "ProviderKind",
    "RolloutHost",
    "RunContext",
    "SamplerKind",
    "SearchContext",
    "SelectorKind",
    "SourceRecord",
    "StageConfig",
    "System",
    "SystemKind",
    "TurnKind",
    "TurnPolicy",
    "TurnState",
    "Verdict",
    "Verifier",
    "VerifierConfig",
    "VerifierKind",
    "find_merge",
    "load_rng",
    "register_payload",
    "save_rng",
    "text_components",
]
