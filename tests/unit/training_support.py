"""A scripted trainer for SFT and RL jobs, so that their lifecycle runs without torch.

Imported as ``training_support`` (``tests/unit`` is on ``sys.path``). ``scripted_kinds``
puts SFT and RL kinds whose trainer is ``ScriptedTrainer`` in the kind registry (their
checks are the real ones, the base model counts as installed) and makes the GGUF adapter
writer copy the adapter. The trainer counts steps 1..max_steps, reports a loss (and for RL
a reward) each step, saves a checkpoint every ``save_steps`` steps and on a pause (the
step number in ``<run dir>/checkpoint``), resumes from it, and stops between steps when
asked; with ``hold_at`` it waits at that step until a stop is asked (at most 10 s).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from emery.config.schema import JobConfig
from emery.jobs import kinds, training_engine
from emery.jobs.training_kinds import RL, SFT, TrainingKind
from emery.store.protocol import Store
from emery.training import job as sft_job
from emery.training import rl_job
from emery.training.paths import run_dir
from emery.training.trainer import TrainingHooks, TrainingStats


class ScriptedTrainer:
    """A trainer without a model: see the module docstring."""

    def __init__(self, hold_at: int | None = None) -> None:
        self.hold_at = hold_at
        self.runs: list[int] = []
        """The first step of each run (after a resume: the checkpoint's next step)."""

    def __call__(
        self, store: Store, config: JobConfig, base_dir: Path, job_id: str, hooks: TrainingHooks
    ) -> tuple[TrainingStats, Path | None]:
        settings = config.sft or config.rl
        assert settings is not None
        folder = run_dir(base_dir, config, job_id)
        folder.mkdir(parents=True, exist_ok=True)
        saved = folder / "checkpoint"
        start = int(saved.read_text()) + 1 if saved.is_file() else 1
        self.runs.append(start)
        step, stopped = start - 1, None
        for step in range(start, settings.max_steps + 1):
            if step == self.hold_at:
                self._hold(hooks)
            if (stopped := hooks.requested()) is not None:
                step -= 1
                break
            hooks.on_loss("train", step, 1.0 / step)
            if hooks.on_reward is not None and config.rl is not None:
                hooks.on_reward(step, step / 10, 0.0)
            if step % settings.save_steps == 0 and step < settings.max_steps:
                saved.write_text(str(step))
                hooks.on_checkpoint(step)
        if stopped == "pause" and step >= start and step % settings.save_steps:
            saved.write_text(str(step))
            hooks.on_checkpoint(step)
        adapter = None
        if stopped is None:
            adapter = folder / "adapter"
            adapter.write_text("adapter")
        return _stats(step, start, stopped), adapter

    @staticmethod
    def _hold(hooks: TrainingHooks) -> None:
        waiting = threading.Event()
        for _ in range(2000):
            if hooks.requested() is not None:
                return
            waiting.wait(0.005)


def _stats(steps: int, start: int, stopped: str | None) -> TrainingStats:
    return TrainingStats(
        steps=steps,
        resumed_from_step=start - 1 if start > 1 else None,
        stopped=stopped,
        first_loss=1.0 / start,
        last_loss=1.0 / max(steps, 1),
        first_val_loss=None,
        last_val_loss=None,
        train_examples=4,
        val_examples=0,
        wall_s=0.01,
        steps_per_s=1.0,
        tokens_per_s=0.0,
        tokens=0,
        peak_rss_mb=1.0,
        device="cpu",
    )


def scripted_kinds(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, trainer: ScriptedTrainer
) -> None:
    """SFT and RL kinds trained by ``trainer`` in the registry; see the module docstring."""

    def installed(name: str) -> Path:
        return tmp_path / f"{name}.gguf"

    def write_adapter(adapter: Path, base: Path, target: Path) -> int:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(adapter.read_text())
        return 1

    for module in (sft_job, rl_job, training_engine):
        monkeypatch.setattr(module, "installed_path", installed)
    monkeypatch.setattr(training_engine, "write_gguf_adapter", write_adapter)
    monkeypatch.setenv("EMERY_ADAPTER_DIR", str(tmp_path / "adapters"))
    for kind in (SFT, RL):
        scripted = TrainingKind(kind.name, kind.checks, trainer, kind.result_type)
        monkeypatch.setitem(kinds.KINDS, kind.name, scripted)


def training_config(tmp_path: Path, kind: str, **settings: Any) -> dict[str, Any]:
    """A small SFT (on four written chats) or RL job, as a config dict."""
    section: dict[str, Any] = {"max_steps": 4, "save_steps": 2, "evaluate": False}
    if kind == "sft":
        messages = [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]
        (tmp_path / "chats.jsonl").write_text((json.dumps({"messages": messages}) + "\n") * 4)
        section["data"] = "chats.jsonl"
    return {
        "job": {"type": kind},
        kind: section | settings,
        "dataset": {"task": "word_problems", "n_train": 4, "n_val": 0, "n_test": 2},
        "lm": {"task": {"model": "local/smollm2-135m"}},
        "runtime": {"workdir": str(tmp_path / "work")},
    }
