"""GRPO over an agent's credited calls (``training.agent_grpo``) on a tiny random Llama,
with the scripted two-call agent of ``agent_grpo_support``."""

from __future__ import annotations

from typing import Any

import pytest
from agent_grpo_support import TARGETS, A, episode, rollouts, tiny_llama

from emery.config.schema import LoRASection
from emery.core.trajectories import CreditedCall
from emery.training.agent_grpo import (
    GRPOSettings,
    completion_logprobs,
    group_advantages,
    grpo_step,
    kl_to_reference,
    make_optimizer,
    mean_episode_reward,
)

# torch, peft and transformers cost about 7 s of CPU to import in each process: the edit
# loop (make check) leaves this module out, make test runs it.
pytestmark = pytest.mark.slow

torch = pytest.importorskip("torch", reason="the train extra: pip install 'emery[train]'")
pytest.importorskip("peft")
pytest.importorskip("transformers")


@pytest.fixture(autouse=True)
def _one_thread() -> Any:
    """A model this small runs fastest on one thread (more only contend on a busy CPU)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _row(group: str, episode_id: str, position: int, reward: float) -> CreditedCall:
    return CreditedCall(
        group_id=group,
        episode_id=episode_id,
        position=position,
        span_id=f"{episode_id}-{position}",
        prompt_token_ids=[1],
        completion_token_ids=[2],
        reward=reward,
    )


def _policy() -> Any:
    from peft import get_peft_model

    from emery.training.trainer import lora_config

    settings = LoRASection(lora_r=4, lora_alpha=8, target_modules=TARGETS)
    return get_peft_model(tiny_llama(), lora_config(settings))


def _logp(model: Any, rows: list[CreditedCall]) -> float:
    with torch.no_grad():
        return float(sum(lp.sum() for lp in completion_logprobs(model, rows, 1.0)))


def _recorded(model: Any, rows: list[CreditedCall]) -> list[CreditedCall]:
    """``rows`` with the sampling policy's log-probabilities (the model as it is now)."""
    with torch.no_grad():
        logprobs = completion_logprobs(model, rows, 1.0)
    return [
        r.model_copy(update={"completion_logprobs": lp.tolist()})
        for r, lp in zip(rows, logprobs, strict=True)
    ]


def test_advantage_is_relative_to_the_group_and_weighs_episodes_equally() -> None:
    rows = [
        *(_row("g", "win", p, 1.0) for p in range(3)),
        _row("g", "loss", 0, 0.0),
        *(_row("flat", f"e{n}", 0, 0.5) for n in range(3)),
    ]
    advantages = group_advantages(rows)
    # mean 0.5, deviation 0.5 whatever the call counts: the episode-level advantage
    assert advantages[:4] == pytest.approx([1.0, 1.0, 1.0, -1.0], abs=1e-3)
    assert advantages[4:] == [0.0, 0.0, 0.0]
    assert mean_episode_reward(rows) == pytest.approx((1 + 0 + 0.5 * 3) / 5)


@pytest.mark.parametrize("recorded", [False, True], ids=["on-policy", "sampled-logprobs"])
def test_grpo_step_moves_the_adapter_towards_the_rewarded_calls(recorded: bool) -> None:
    model = _policy()
    rows = rollouts()
    if recorded:
        rows = _recorded(model, rows)
    rewarded = [r for r in rows if r.reward == 1.0]
    unrewarded = [r for r in rows if r.reward == 0.0]
    before = (_logp(model, rewarded), _logp(model, unrewarded))
    optimizer = make_optimizer(model, learning_rate=1e-2)
    settings = GRPOSettings(micro_batch=len(rows))
    stats = [grpo_step(model, optimizer, rows, settings) for _ in range(3)]
    after = (_logp(model, rewarded), _logp(model, unrewarded))
    assert after[0] > before[0] + 0.5
    assert after[1] < before[1] - 0.5
    first = stats[0]
    assert (first.calls, first.episodes, first.groups, first.groups_with_signal) == (16, 8, 2, 2)
    assert first.tokens == 8 * 5
    assert first.mean_reward == 0.5
    assert all(s.updated for s in stats)
    assert first.kl == 0.0  # measured before the first update: the adapter is still zero
    assert stats[-1].kl > 0.0


def test_zero_variance_groups_give_no_advantage_and_no_update() -> None:
    model = _policy()
    rows = [r for n in range(3) for r in episode("g1", f"e{n}", A)]
    assert group_advantages(rows) == [0.0] * len(rows)
    weights = [p.detach().clone() for p in model.parameters() if p.requires_grad]
    stats = grpo_step(model, make_optimizer(model, 1e-2), rows, GRPOSettings())
    assert not stats.updated
    assert stats.groups_with_signal == 0
    assert stats.mean_reward == 1.0
    after = [p for p in model.parameters() if p.requires_grad]
    assert all(torch.equal(w, p) for w, p in zip(weights, after, strict=True))


def test_kl_to_the_reference_is_zero_before_an_update_and_positive_after() -> None:
    model = _policy()
    rows = rollouts()
    assert kl_to_reference(model, rows) == 0.0
    optimizer = make_optimizer(model, 1e-2)
    grpo_step(model, optimizer, rows, GRPOSettings(beta=0.0))
    assert kl_to_reference(model, rows) > 0.0
    # without the KL term in the loss, the step still reports the KL it started from
    stats = grpo_step(model, optimizer, rows, GRPOSettings(beta=0.0))
    assert stats.updated
    assert stats.kl > 0.0
    # the reference pass leaves the adapter switched on
    drifted = kl_to_reference(model, rows)
    assert drifted > 0.0
    # a step without signal takes no update but still measures the KL
    flat = [r for n in range(2) for r in episode("g1", f"flat{n}", A)]
    stats = grpo_step(model, make_optimizer(model, 1e-2), flat, GRPOSettings())
    assert not stats.updated
    assert stats.kl == pytest.approx(kl_to_reference(model, flat))
    assert stats.kl > 0.0


def test_rows_that_cannot_be_scored_are_refused() -> None:
    model = _policy()
    optimizer = make_optimizer(model, 1e-2)
    bad = rollouts()
    bad[0] = bad[0].model_copy(update={"completion_logprobs": [-1.0]})
    with pytest.raises(ValueError, match="1 log-probabilities for 3 completion tokens"):
        grpo_step(model, optimizer, bad, GRPOSettings())
    bad[0] = bad[0].model_copy(update={"prompt_token_ids": [], "completion_logprobs": None})
    with pytest.raises(ValueError, match="has no prompt tokens"):
        grpo_step(model, optimizer, bad, GRPOSettings())
