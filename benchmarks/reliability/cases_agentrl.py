"""Bad ``[rl]`` settings of RL on agents: the credit policy (``credit``, ``discount``) and
the agent trained (``agent``); each ends with one error line and stores no job."""

from __future__ import annotations

from cases import PROGRAM, Case, job, train

AGENT = "def solve(task, lm):\n    return lm(task['question'])\n"
"""A function agent module (``agent:solve``) for the cases that need an agent system."""
MODEL = "local/smollm2-135m"
"""RL tunes a local model (not pulled in a case's folder: the checks come first)."""
AGENT_SYSTEM = '[system]\nkind = "function_agent"\nagent = "agent:solve"\n'


def _rl(settings: str, system: str = AGENT_SYSTEM, runtime: str = "") -> str:
    return job(model=MODEL, extra=runtime) + f'\n{system}\n[job]\ntype = "rl"\n\n[rl]\n{settings}\n'


def _agent_rl(name: str, expect: str, settings: str) -> Case:
    return train(name, expect, _rl(settings), **{"agent.py": AGENT})


def agentrl_cases() -> list[Case]:
    """Each names the ``[rl]`` key and what it accepts."""
    return [
        _agent_rl(
            "rl credit: unknown policy",
            "rl.credit: Input should be 'same', 'discounted' or 'per_step'",
            'credit = "last"',
        ),
        _agent_rl(
            "rl discount: without discounted credit",
            'discount applies to credit = "discounted", not credit = "same"',
            "discount = 0.5",
        ),
        _agent_rl(
            "rl discount: zero",
            "rl.discount: Input should be greater than 0",
            'credit = "discounted"\ndiscount = 0',
        ),
        _agent_rl(
            "rl discount: above one",
            "rl.discount: Input should be less than or equal to 1",
            'credit = "discounted"\ndiscount = 1.5',
        ),
        _agent_rl("rl agent: empty", "rl.agent", 'agent = ""'),
        _agent_rl("rl agent: blank", "an agent name cannot be blank", 'agent = "  "'),
        _agent_rl("rl agent: not a name", "rl.agent: Input should be a valid string", "agent = 3"),
        train(
            "rl agent: on a prompt program",
            "rl.agent applies to an agent's LM calls",
            _rl('agent = "solver"', PROGRAM),
        ),
        train(
            "rl executor: runners for a prompt program",
            "executor = 'runners' runs an agent's episodes elsewhere",
            _rl("", PROGRAM, runtime='executor = "runners"\n'),
        ),
        train(
            "rl credit: on a prompt program",
            "rl.credit applies to an agent's LM calls",
            _rl('credit = "per_step"', PROGRAM),
        ),
    ]
