"""The local model's weights for training: its GGUF dequantized by transformers, cached.

transformers reads ``local/<name>``'s GGUF (llama and qwen2 architectures) into float
weights; the first load takes tens of seconds on 2 cores, so the result is saved once as
a Hugging Face model folder (float16) under ``<model dir>/hf/<name>`` and later loads
read that in under a second. No hub download.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from emery.core.errors import EmeryError
from emery.lm.catalog import installed_path, model_dir

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

log = logging.getLogger(__name__)

READY = ".ready"


def import_torch() -> Any:
    """torch, or a one-line error naming the extra to install."""
    try:
        import torch
    except ImportError:
        raise EmeryError(
            "sft jobs need the train extra: pip install 'emery[train]'"
            " (torch==2.13.0 from the CPU wheel)"
        ) from None
    return torch


def hf_dir(name: str) -> Path:
    """The cached Hugging Face folder of ``local/<name>``."""
    return model_dir() / "hf" / name


def load_base(name: str) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """``local/<name>`` as a float32 transformers model and its tokenizer."""
    torch = import_torch()
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = hf_dir(name)
    if not (folder / READY).is_file():
        _convert(name, folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer


def _convert(name: str, folder: Path) -> None:
    torch = import_torch()
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf_path = installed_path(name)
    log.info("dequantizing %s for training (once)", gguf_path.name)
    kwargs = {"gguf_file": gguf_path.name}
    tokenizer = AutoTokenizer.from_pretrained(gguf_path.parent, **kwargs)
    model = AutoModelForCausalLM.from_pretrained(gguf_path.parent, dtype=torch.float16, **kwargs)
    model.hf_quantizer = None  # the weights are plain floats now: saving is allowed
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    model.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    (partial / READY).write_text(gguf_path.name)
    shutil.rmtree(folder, ignore_errors=True)
    partial.rename(folder)
