"""GRPO over an agent's credited LM calls: one optimizer step on a LoRA from ``CreditedCall`` rows.

trl's ``GRPOTrainer`` (``rl_trainer``) samples its own completions of one prompt; an agent's
episodes are sampled elsewhere (its LM calls served by llama.cpp, recorded as spans, turned
into rows by ``tracing.trajectories``), so this step only scores and updates:

- **Advantage** (``group_advantages``): the rows of one ``group_id`` are the calls of the
  episodes of one example. A row's advantage is its credited reward minus the group's mean,
  divided by the group's standard deviation plus ``std_epsilon``; the mean and (population)
  deviation weigh each episode equally, spreading its weight over its calls, so with the
  policy that credits every call its episode's reward this is GRPO's episode-level advantage
  exactly, however many calls each episode made. A group whose calls all have one reward
  has advantage 0; a step whose rows all have advantage 0 takes no optimizer step.
- **Policy loss**: on every completion token of every row, PPO's clipped surrogate
  ``-min(ratio * A, clip(ratio, 1 - clip_epsilon, 1 + clip_epsilon) * A)``, the ratio
  taken against the sampling policy's ``completion_logprobs`` when the row has them (the
  served model is a quantized copy, and may be a step behind), else on-policy (ratio 1,
  the gradient of ``A * log p``). Logits are divided by ``temperature`` (that of the
  recorded log-probabilities).
- **KL**: ``beta`` times trl's per-token estimator ``exp(r - p) - (r - p) - 1`` against the
  reference model, which is the same model with the LoRA adapter disabled.
- The loss is summed over tokens and divided by the step's token count (trl's ``dapo``
  normalisation), accumulated over micro-batches of ``micro_batch`` rows, the gradient norm
  clipped at ``max_grad_norm``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from emery.core.trajectories import CreditedCall
from emery.training.base_model import import_torch


@dataclass(frozen=True)
class GRPOSettings:
    """The knobs of one GRPO step (trl's defaults where trl has the same knob)."""

    beta: float = 0.04
    """Weight of the KL term to the reference model in the loss (its value is reported
    whatever the weight)."""
    clip_epsilon: float = 0.2
    temperature: float = 1.0
    """The temperature of the distribution ``completion_logprobs`` were taken from (logits
    are divided by it): 1.0 for emery's local model, which records the log-softmax of its
    raw logits whatever temperature it sampled at."""
    std_epsilon: float = 1e-4
    max_grad_norm: float | None = 1.0
    micro_batch: int = 4
    """Rows per forward pass (the gradient is accumulated over them)."""


class StepStats(BaseModel):
    """What one GRPO step saw and did."""

    calls: int
    episodes: int
    groups: int
    groups_with_signal: int
    """Groups whose calls' rewards differ (the others have advantage 0)."""
    tokens: int
    """Completion tokens scored."""
    mean_reward: float
    """The mean over episodes of each episode's mean credited reward."""
    loss: float
    kl: float
    """Mean per-token KL to the reference model, measured before the update (also when
    the step takes none)."""
    clipped_fraction: float
    """Share of tokens whose importance ratio was clipped."""
    updated: bool
    """False when no row had an advantage (no optimizer step was taken)."""


def group_advantages(rows: Sequence[CreditedCall], std_epsilon: float = 1e-4) -> list[float]:
    """Each row's group-relative advantage (see the module docstring), in row order."""
    calls_per_episode: dict[tuple[str, str], int] = defaultdict(int)
    for row in rows:
        calls_per_episode[(row.group_id, row.episode_id)] += 1
    groups: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for row in rows:
        weight = 1.0 / calls_per_episode[(row.group_id, row.episode_id)]
        groups[row.group_id].append((row.reward, weight))
    stats: dict[str, tuple[float, float]] = {}
    for group_id, values in groups.items():
        total = sum(w for _, w in values)
        mean = sum(r * w for r, w in values) / total
        std = math.sqrt(sum(w * (r - mean) ** 2 for r, w in values) / total)
        stats[group_id] = (mean, std)
    advantages = []
    for row in rows:
        mean, std = stats[row.group_id]
        # a group whose rewards are all equal gets exactly 0, not a rounding residue
        advantages.append(0.0 if std == 0.0 else (row.reward - mean) / (std + std_epsilon))
    return advantages


def mean_episode_reward(rows: Sequence[CreditedCall]) -> float:
    """The mean over episodes of each episode's mean credited reward."""
    episodes: dict[tuple[str, str], list[float]] = defaultdict(list)
    for row in rows:
        episodes[(row.group_id, row.episode_id)].append(row.reward)
    return sum(sum(r) / len(r) for r in episodes.values()) / len(episodes) if episodes else 0.0


def make_optimizer(model: Any, learning_rate: float) -> Any:
    """AdamW over the model's trainable (LoRA) parameters, without weight decay (as trl)."""
    torch = import_torch()
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("the model has no trainable parameters: wrap it in a LoRA first")
    return torch.optim.AdamW(params, lr=learning_rate, weight_decay=0.0)


def completion_logprobs(model: Any, rows: Sequence[CreditedCall], temperature: float) -> list[Any]:
    """Each row's completion tokens' log-probabilities under ``model`` (1-d tensors, with
    the graph: call it under ``torch.no_grad()`` when no gradient is wanted)."""
    torch = import_torch()
    device = next(model.parameters()).device
    sequences = [row.prompt_token_ids + row.completion_token_ids for row in rows]
    width = max(len(s) for s in sequences)
    ids = torch.zeros((len(rows), width), dtype=torch.long, device=device)
    mask = torch.zeros((len(rows), width), dtype=torch.long, device=device)
    for i, sequence in enumerate(sequences):
        ids[i, : len(sequence)] = torch.tensor(sequence, dtype=torch.long)
        mask[i, : len(sequence)] = 1
    # right-padded: only the positions from the shortest prompt's last token on predict a
    # completion token, so only their logits are computed (agents' prompts are long)
    keep = width - min(len(row.prompt_token_ids) for row in rows) + 1
    logits = model(input_ids=ids, attention_mask=mask, logits_to_keep=keep).logits
    offset = width - keep
    out = []
    for i, row in enumerate(rows):
        start = len(row.prompt_token_ids) - 1 - offset
        scores = logits[i, start : start + len(row.completion_token_ids)].float() / temperature
        targets = ids[i, len(row.prompt_token_ids) : len(sequences[i])]
        out.append(torch.log_softmax(scores, dim=-1).gather(-1, targets[:, None]).squeeze(-1))
    return out


def reference_logprobs(model: Any, rows: Sequence[CreditedCall], temperature: float) -> list[Any]:
    """``completion_logprobs`` of the reference model: ``model`` with its adapter disabled."""
    torch = import_torch()
    with torch.no_grad(), model.disable_adapter():
        return completion_logprobs(model, rows, temperature)


def kl_to_reference(
    model: Any, rows: Sequence[CreditedCall], temperature: float = 1.0, micro_batch: int = 4
) -> float:
    """The mean per-token KL estimate of ``model`` to its reference on ``rows``' completions."""
    torch = import_torch()
    total = 0.0
    tokens = 0
    for batch in _batches([(row, 0.0) for row in trainable_rows(rows)], micro_batch):
        batch_rows = [row for row, _ in batch]
        with torch.no_grad():
            policy = completion_logprobs(model, batch_rows, temperature)
        reference = reference_logprobs(model, batch_rows, temperature)
        for p, r in zip(policy, reference, strict=True):
            total += float(_per_token_kl(torch, p, r).sum())
            tokens += len(p)
    return total / tokens if tokens else 0.0


def trainable_rows(rows: Sequence[CreditedCall]) -> list[CreditedCall]:
    """The rows with completion tokens to score (a call whose tokens were not recorded has
    none); a row with completion tokens that cannot be scored is refused."""
    kept = [row for row in rows if row.completion_token_ids]
    for row in kept:
        if not row.prompt_token_ids:
            raise ValueError(f"call {row.span_id} has no prompt tokens")
        logprobs = row.completion_logprobs
        if logprobs is not None and len(logprobs) != len(row.completion_token_ids):
            raise ValueError(
                f"call {row.span_id} has {len(logprobs)} log-probabilities for"
                f" {len(row.completion_token_ids)} completion tokens"
            )
    return kept


def grpo_step(
    model: Any, optimizer: Any, rows: Sequence[CreditedCall], settings: GRPOSettings
) -> StepStats:
    """One GRPO step of ``model`` (a peft LoRA model) on ``rows``: see the module docstring."""
    torch = import_torch()
    all_rows = list(rows)
    advantages = group_advantages(all_rows, settings.std_epsilon)
    trainable = set(map(id, trainable_rows(all_rows)))
    scored = [(r, a) for r, a in zip(all_rows, advantages, strict=True) if id(r) in trainable]
    tokens = sum(len(r.completion_token_ids) for r, _ in scored)
    signal_groups = {r.group_id for r, a in zip(all_rows, advantages, strict=True) if a != 0.0}
    stats = {
        "calls": len(all_rows),
        "episodes": len({(r.group_id, r.episode_id) for r in all_rows}),
        "groups": len({r.group_id for r in all_rows}),
        "groups_with_signal": len(signal_groups),
        "tokens": tokens,
        "mean_reward": mean_episode_reward(all_rows),
    }
    if not signal_groups or tokens == 0:
        kl = kl_to_reference(model, all_rows, settings.temperature, settings.micro_batch)
        return StepStats(**stats, loss=0.0, kl=kl, clipped_fraction=0.0, updated=False)
    model.train()
    optimizer.zero_grad(set_to_none=True)
    loss_sum = kl_sum = clipped = 0.0
    for batch in _batches(scored, settings.micro_batch):
        batch_rows = [row for row, _ in batch]
        policy = completion_logprobs(model, batch_rows, settings.temperature)
        # measured with beta 0 too: the KL is reported every step
        reference = reference_logprobs(model, batch_rows, settings.temperature)
        batch_loss = torch.zeros((), device=policy[0].device)
        for i, (row, advantage) in enumerate(batch):
            logp = policy[i]
            old = (
                logp.detach()
                if row.completion_logprobs is None
                else torch.tensor(row.completion_logprobs, dtype=logp.dtype, device=logp.device)
            )
            ratio = torch.exp(logp - old)
            bounded = torch.clamp(ratio, 1 - settings.clip_epsilon, 1 + settings.clip_epsilon)
            per_token = -torch.min(ratio * advantage, bounded * advantage)
            if advantage > 0:
                clipped += float((ratio > 1 + settings.clip_epsilon).sum())
            elif advantage < 0:
                clipped += float((ratio < 1 - settings.clip_epsilon).sum())
            kl = _per_token_kl(torch, logp, reference[i])
            if settings.beta:
                per_token = per_token + settings.beta * kl
            kl_sum += float(kl.detach().sum())
            batch_loss = batch_loss + per_token.sum()
        (batch_loss / tokens).backward()
        loss_sum += float(batch_loss.detach())
    if settings.max_grad_norm is not None:
        params = [p for group in optimizer.param_groups for p in group["params"]]
        torch.nn.utils.clip_grad_norm_(params, settings.max_grad_norm)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return StepStats(
        **stats,
        loss=loss_sum / tokens,
        kl=kl_sum / tokens,
        clipped_fraction=clipped / tokens,
        updated=True,
    )


def _per_token_kl(torch: Any, policy: Any, reference: Any) -> Any:
    """trl's k3 estimator of KL(policy || reference) per token (>= 0, 0 where equal)."""
    delta = reference - policy
    return torch.exp(delta) - delta - 1


def _batches(
    rows: list[tuple[CreditedCall, float]], size: int
) -> Iterator[list[tuple[CreditedCall, float]]]:
    for start in range(0, len(rows), max(1, size)):
        yield rows[start : start + size]
