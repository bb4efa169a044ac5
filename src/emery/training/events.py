"""A training job's event payloads (SFT, RL), registered when this module is imported.

The kinds and fields are those stored since training jobs had events, which the dashboard's
and ``--stream-format chart``'s training curves read: ``train_loss`` and ``val_loss``
(``TrainLoss``, per logged step), ``train_reward`` (``TrainReward``: an RL step's mean
reward and its KL to the base model, when the trainer reported one), ``adapter_saved``,
``test_scored`` and, for an SFT job's rejection sampling, ``sft_samples`` (each round) and
``sft_samples_kept`` (what it kept).
"""

from __future__ import annotations

from typing import ClassVar

from emery.core.payloads import Payload, register_payload
from emery.training.data import SampledData


class TrainLoss(Payload):
    """The loss at training step ``step``: on the train split (``train_loss``) or on val
    (``val_loss``), the kind naming which."""

    kind: ClassVar[str] = "train_loss"
    step: int
    loss: float


register_payload(TrainLoss, "train_loss", "val_loss")


@register_payload
class TrainReward(Payload):
    """An RL step's mean reward, and its KL to the base model (None: not reported)."""

    kind: ClassVar[str] = "train_reward"
    step: int
    reward: float
    kl: float | None = None


@register_payload
class AdapterSaved(Payload):
    """The trained LoRA written as a GGUF adapter: served as ``model``."""

    kind: ClassVar[str] = "adapter_saved"
    model: str
    path: str
    tensors: int
    """LoRA tensor pairs written."""


@register_payload
class ScoredOnTest(Payload):
    """The job's prompt on test with the base and the tuned model (mean scores)."""

    kind: ClassVar[str] = "test_scored"
    base: float
    tuned: float
    n: int
    lift: float


@register_payload
class SftSamples(Payload):
    """One round of an SFT job's rejection sampling: its rollouts, the replies kept (scoring
    at least ``min_score``) and the tokens spent."""

    kind: ClassVar[str] = "sft_samples"
    round: int
    rollouts: int
    kept: int
    tokens: int


@register_payload
class SftSamplesKept(Payload, SampledData):
    """What an SFT job's rejection sampling kept, once all its rounds are stored."""

    kind: ClassVar[str] = "sft_samples_kept"
