"""A peft LoRA adapter written as a llama.cpp GGUF LoRA adapter (as ``convert_lora_to_gguf``).

Metadata: ``general.type = "adapter"``, ``adapter.type = "lora"``, ``adapter.lora.alpha``
and the base model's ``general.architecture``. Tensors: ``blk.N.<name>.weight.lora_a``
(rank × in, as peft's ``lora_A``) and ``.lora_b`` (out × rank), in float32; on llama the
``lora_b`` rows of q and k are permuted like the base weights (see ``names``). Needs
numpy, safetensors and gguf, not torch.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from emery.core.errors import EmeryError
from emery.training.names import ARCHITECTURES, gguf_lora_name, permuted_rows, rope_heads

ADAPTER_WEIGHTS = "adapter_model.safetensors"
ADAPTER_CONFIG = "adapter_config.json"


def base_layout(base_gguf: Path) -> dict[str, Any]:
    """The base model's architecture and head counts, read from its GGUF header."""
    import gguf

    fields = gguf.GGUFReader(str(base_gguf)).fields
    arch = str(fields["general.architecture"].contents())
    if arch not in ARCHITECTURES:
        raise EmeryError(f"LoRA adapters for {arch!r} models are not supported")
    heads = int(fields[f"{arch}.attention.head_count"].contents())
    kv_key = f"{arch}.attention.head_count_kv"
    kv_heads = int(fields[kv_key].contents()) if kv_key in fields else heads
    return {"architecture": arch, "heads": heads, "kv_heads": kv_heads}


def write_gguf_adapter(adapter_dir: Path, base_gguf: Path, target: Path) -> int:
    """Convert the peft adapter saved in ``adapter_dir`` into ``target``; returns the
    number of LoRA tensor pairs written."""
    import gguf
    import numpy as np
    from safetensors.numpy import load_file

    settings = json.loads((adapter_dir / ADAPTER_CONFIG).read_text())
    layout = base_layout(base_gguf)
    arch = layout["architecture"]
    tensors = load_file(str(adapter_dir / ADAPTER_WEIGHTS))
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    writer = gguf.GGUFWriter(str(partial), arch)
    writer.add_type(gguf.GGUFType.ADAPTER)
    writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
    writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, float(settings["lora_alpha"]))
    for key in sorted(tensors):
        name = gguf_lora_name(key)
        data = np.ascontiguousarray(tensors[key], dtype=np.float32)
        heads = rope_heads(name, arch)
        if heads is not None:
            data = np.ascontiguousarray(data[permuted_rows(data.shape[0], layout[heads])])
        writer.add_tensor(name, data)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    partial.replace(target)
    return len(tensors) // 2
