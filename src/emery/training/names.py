"""Hugging Face (peft) LoRA tensor names → llama.cpp GGUF adapter tensor names.

peft stores ``base_model.model.model.layers.3.self_attn.q_proj.lora_A.weight``; llama.cpp's
``convert_lora_to_gguf.py`` writes it as ``blk.3.attn_q.weight.lora_a`` (``lora_B`` →
``.lora_b``). llama (SmolLM2) and qwen2 share these module names.
"""

from __future__ import annotations

import re

MODULES: dict[str, str] = {
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}
"""HF module (within a decoder layer) → GGUF tensor base name."""

ARCHITECTURES = ("llama", "qwen2")
"""GGUF architectures whose adapters this mapping covers."""

ROPE_PERMUTED = {"attn_q": "heads", "attn_k": "kv_heads"}
"""llama's q/k rows are permuted in GGUF (convert_hf_to_gguf's ``permute``): a LoRA ``B``
of these needs the same row permutation, with this many heads."""

_PEFT_KEY = re.compile(
    r"^(?:base_model\.model\.)?model\.layers\.(\d+)\.(\w+\.\w+)\.lora_([AB])(?:\.default)?\.weight$"
)


def gguf_lora_name(peft_key: str) -> str:
    """The GGUF name of one peft LoRA tensor; ``ValueError`` for one llama.cpp cannot load."""
    match = _PEFT_KEY.match(peft_key)
    if match is None:
        raise ValueError(f"not a LoRA tensor of a decoder layer: {peft_key!r}")
    block, module, which = match.groups()
    target = MODULES.get(module)
    if target is None:
        known = ", ".join(m.split(".")[1] for m in MODULES)
        raise ValueError(f"{peft_key!r}: module {module!r} has no GGUF tensor (use {known})")
    return f"blk.{block}.{target}.weight.lora_{which.lower()}"


def rope_heads(gguf_name: str, architecture: str) -> str | None:
    """``"heads"``/``"kv_heads"`` when this tensor's rows need llama's q/k permutation
    (only a ``lora_b`` of attn_q/attn_k on the llama architecture), else None."""
    if architecture != "llama" or not gguf_name.endswith(".lora_b"):
        return None
    return ROPE_PERMUTED.get(gguf_name.split(".")[2])


def permuted_rows(n_rows: int, n_head: int) -> list[int]:
    """The row order llama.cpp's converter gives a q/k weight of ``n_rows`` rows:
    within each head, rows ``0, h, 1, h+1, ...`` (h = half the head size)."""
    if n_rows % (2 * n_head):
        raise ValueError(f"{n_rows} rows do not split into {n_head} heads of two halves")
    half = n_rows // n_head // 2
    order = []
    for head in range(n_head):
        start = head * 2 * half
        for i in range(half):
            order += [start + i, start + half + i]
    return order
