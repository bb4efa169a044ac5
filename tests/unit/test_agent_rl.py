"""RL on an agent (``training.agent_rl``): the step loop, the policy it serves to the next
rollouts, and exact resume from a checkpoint, on ``agent_grpo_support``'s tiny Llama and
scripted two-call agent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agent_grpo_support import TARGETS, rollouts, tiny_llama

from emery.config.schema import RLSection
from emery.core.trajectories import CreditedCall
from emery.training.agent_rl import train_agent_rl
from emery.training.trainer import TrainingHooks, last_checkpoint

# torch, peft and transformers cost about 7 s of CPU to import in each process: the edit
# loop (make check) leaves this module out, make test runs it.
pytestmark = pytest.mark.slow

torch = pytest.importorskip("torch", reason="the train extra: pip install 'emery[train]'")
pytest.importorskip("peft")

SETTINGS = RLSection(
    max_steps=4,
    save_steps=2,
    learning_rate=1e-2,
    lora_r=4,
    lora_alpha=8,
    target_modules=TARGETS,
    threads=1,
)


def _weights(folder: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    return load_file(str(folder / "adapter_model.safetensors"))


class Source:
    """The scripted agent's episodes, the same for a step whatever the run; it records the
    policy each step was served (None: the base model) and can crash at a step."""

    def __init__(self, crash_at: int | None = None) -> None:
        self.crash_at = crash_at
        self.served: dict[int, dict[str, Any] | None] = {}

    def rows(self, step: int, policy: Path | None) -> list[CreditedCall]:
        if step == self.crash_at:
            raise RuntimeError("killed")
        self.served[step] = None if policy is None else _weights(policy)
        return rollouts(prefix=f"s{step}-", groups=1)


class Hooks:
    def __init__(self, pause_after: int | None = None) -> None:
        self.pause_after = pause_after
        self.rewards: list[tuple[int, float, float | None]] = []
        self.checkpoints: list[int] = []

    def hooks(self) -> TrainingHooks:
        return TrainingHooks(
            on_loss=lambda split, step, loss: None,
            on_checkpoint=self.checkpoints.append,
            requested=lambda: "pause" if self.rewards[-1][0] == self.pause_after else None,
            on_reward=lambda step, reward, kl: self.rewards.append((step, reward, kl)),
        )


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def _run(run_dir: Path, source: Source, hooks: Hooks) -> Any:
    return train_agent_rl(tiny_llama, SETTINGS, source, run_dir, seed=0, hooks=hooks.hooks())


def test_each_step_serves_the_last_policy_and_reports_reward_and_kl(tmp_path: Path) -> None:
    source, hooks = Source(), Hooks()
    stats, adapter = _run(tmp_path, source, hooks)
    assert (stats.steps, stats.stopped, stats.resumed_from_step) == (4, None, None)
    assert adapter == tmp_path / "adapter"
    assert source.served[1] is None  # the first rollouts are the base model's
    served = [source.served[s] for s in (2, 3, 4)]
    assert all(w is not None for w in served)
    assert not _same(served[0], served[1])  # type: ignore[arg-type]
    assert [step for step, _, _ in hooks.rewards] == [1, 2, 3, 4]
    assert all(reward == 0.5 for _, reward, _ in hooks.rewards)
    assert hooks.rewards[0][2] == 0.0
    assert (hooks.rewards[-1][2] or 0.0) > 0.0
    assert hooks.checkpoints == [2, 4]
    assert stats.train_examples == 4 * 4  # episodes
    assert stats.tokens == 4 * 20
    assert (stats.first_reward, stats.last_reward) == (0.5, 0.5)


def test_a_paused_or_killed_run_resumes_exactly(tmp_path: Path) -> None:
    straight = Source()
    _, adapter = _run(tmp_path / "straight", straight, Hooks())
    assert adapter is not None
    expected = _weights(adapter)

    paused = Source()
    hooks = Hooks(pause_after=3)
    stats, adapter = _run(tmp_path / "paused", paused, hooks)
    assert (stats.steps, stats.stopped, adapter) == (3, "pause", None)
    assert hooks.checkpoints == [2, 3]  # every save_steps, and on the pause
    resumed = Source()
    stats, adapter = _run(tmp_path / "paused", resumed, Hooks())
    assert (stats.steps, stats.resumed_from_step) == (4, 3)
    assert list(resumed.served) == [4]
    assert _same(resumed.served[4], straight.served[4])  # type: ignore[arg-type]
    assert adapter is not None
    assert _same(_weights(adapter), expected)
    assert stats.first_reward == 0.5  # the whole run's, not only the resumed part's

    run_dir = tmp_path / "killed"
    with pytest.raises(RuntimeError, match="killed"):
        _run(run_dir, Source(crash_at=4), Hooks())
    assert last_checkpoint(run_dir) == run_dir / "checkpoints" / "checkpoint-2"
    again = Source()
    stats, adapter = _run(run_dir, again, Hooks())
    assert (stats.steps, stats.resumed_from_step, list(again.served)) == (4, 2, [3, 4])
    assert adapter is not None
    assert _same(_weights(adapter), expected)
