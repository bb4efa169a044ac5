"""A tiny random Llama and a scripted two-call agent for the agent GRPO tests.

Imported as ``agent_grpo_support`` (``tests/unit`` is on ``sys.path``). The agent makes two
LM calls per episode: the first call's completion is an action, the environment answers
with an observation token, the second call's prompt is the first's with the action and the
observation appended. An episode whose two completions are ``A``'s is rewarded 1, one whose
completions are ``B``'s 0. Needs torch, transformers and peft (the train extra).
"""

from __future__ import annotations

from typing import Any

from emery.core.trajectories import CreditedCall

A = ([5, 6, 7], [8, 9])
B = ([10, 11, 12], [13, 14])
OBSERVATION = {5: 15, 10: 16}
"""The environment's answer to the first action token."""
TASKS = {"g1": [1, 2, 3], "g2": [1, 4]}
TARGETS = ("q_proj", "v_proj")
"""The LoRA's target modules."""


def tiny_llama() -> Any:
    """A randomly initialised 2-layer Llama of hidden size 32 over 20 tokens (seeded)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=20,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=32,
    )
    return LlamaForCausalLM(config)


def episode(
    group: str, episode_id: str, actions: tuple[list[int], list[int]]
) -> list[CreditedCall]:
    """The two credited calls of one episode; reward 1 when the agent played ``A``."""
    reward = 1.0 if actions == A else 0.0
    first_prompt = TASKS[group]
    second_prompt = first_prompt + actions[0] + [OBSERVATION[actions[0][0]]]
    return [
        CreditedCall(
            group_id=group,
            episode_id=episode_id,
            position=position,
            span_id=f"{episode_id}-{position}",
            prompt_token_ids=prompt,
            completion_token_ids=completion,
            reward=reward,
        )
        for position, (prompt, completion) in enumerate(
            [(first_prompt, actions[0]), (second_prompt, actions[1])]
        )
    ]


def rollouts(prefix: str = "", groups: int = len(TASKS)) -> list[CreditedCall]:
    """Four episodes (A, B, A, B) of each of the first ``groups`` tasks: 8 calls a group."""
    rows: list[CreditedCall] = []
    for group in list(TASKS)[:groups]:
        for n, actions in enumerate([A, B, A, B]):
            rows += episode(group, f"{prefix}{group}-e{n}", actions)
    return rows
