"""SFT jobs without torch: name mapping, q/k row order, config checks, chat JSONL errors,
adapter names."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from emery.config.schema import JobConfig
from emery.core.errors import ConfigError, ModelNotInstalledError
from emery.lm import catalog
from emery.training.data import hold_out, load_chat_jsonl, prompt_completion
from emery.training.names import gguf_lora_name, permuted_rows, rope_heads

LAYER = "base_model.model.model.layers.{}.{}.lora_{}.weight"


@pytest.mark.parametrize(
    ("module", "name"),
    [
        ("self_attn.q_proj", "attn_q"),
        ("self_attn.k_proj", "attn_k"),
        ("self_attn.v_proj", "attn_v"),
        ("self_attn.o_proj", "attn_output"),
        ("mlp.gate_proj", "ffn_gate"),
        ("mlp.up_proj", "ffn_up"),
        ("mlp.down_proj", "ffn_down"),
    ],
)
def test_peft_names_map_to_llama_cpp_adapter_names(module: str, name: str) -> None:
    assert gguf_lora_name(LAYER.format(7, module, "A")) == f"blk.7.{name}.weight.lora_a"
    assert gguf_lora_name(LAYER.format(12, module, "B")) == f"blk.12.{name}.weight.lora_b"


def test_names_without_a_gguf_tensor_are_refused() -> None:
    with pytest.raises(ValueError, match="no GGUF tensor"):
        gguf_lora_name(LAYER.format(0, "self_attn.rotary_emb", "A"))
    with pytest.raises(ValueError, match="not a LoRA tensor"):
        gguf_lora_name("base_model.model.lm_head.lora_A.weight")


def test_names_agree_with_the_gguf_package() -> None:
    gguf = pytest.importorskip("gguf")
    for arch in (gguf.MODEL_ARCH.LLAMA, gguf.MODEL_ARCH.QWEN2):
        mapping = gguf.get_tensor_name_map(arch, 4)
        for module in ("self_attn.q_proj", "self_attn.o_proj", "mlp.down_proj"):
            hf = f"model.layers.3.{module}"
            ours = gguf_lora_name(LAYER.format(3, module, "A"))
            assert ours == mapping.get_name(hf) + ".weight.lora_a"


def test_only_llama_q_and_k_b_matrices_are_permuted() -> None:
    assert rope_heads("blk.0.attn_q.weight.lora_b", "llama") == "heads"
    assert rope_heads("blk.0.attn_k.weight.lora_b", "llama") == "kv_heads"
    assert rope_heads("blk.0.attn_q.weight.lora_a", "llama") is None
    assert rope_heads("blk.0.attn_v.weight.lora_b", "llama") is None
    assert rope_heads("blk.0.attn_q.weight.lora_b", "qwen2") is None


def test_row_order_is_llama_cpp_convert_permute() -> None:
    n_head, rows = 3, 12
    weights = np.arange(rows * 2).reshape(rows, 2)
    reference = (
        weights.reshape(n_head, 2, rows // n_head // 2, 2).swapaxes(1, 2).reshape(weights.shape)
    )
    assert (weights[permuted_rows(rows, n_head)] == reference).all()
    with pytest.raises(ValueError, match="do not split"):
        permuted_rows(10, 3)


def _config(**overrides: object) -> dict[str, object]:
    data: dict[str, object] = {
        "dataset": {"task": "word_problems"},
        "job": {"type": "sft"},
        "sft": {"data": "chats.jsonl"},
        "lm": {"task": {"model": "local/smollm2-135m"}},
    }
    return data | overrides


def test_sft_config_validation() -> None:
    config = JobConfig.model_validate(_config())
    assert config.job.type == "sft"
    assert config.sft is not None
    assert config.sft.candidate == "best"
    assert JobConfig.model_validate({"dataset": {"task": "word_problems"}}).job.type == "prompt"
    bad = [
        ({"sft": None}, "goes with"),
        ({"job": {"type": "prompt"}}, "goes with"),
        ({"sft": {"data": "a.jsonl", "source_job": "j-1"}}, "exactly one"),
        ({"sft": {}}, "exactly one"),
        ({"lm": {"task": {"model": "openai/gpt-4o"}}}, "known local model"),
        ({"lm": {"task": {"model": "local/smollm2-135m+j-1"}}}, "known local model"),
        ({"sft": {"data": "a.jsonl", "max_steps": 0}}, "max_steps"),
        ({"sft": {"data": "a.jsonl", "splits": ["test"]}}, "splits"),
    ]
    for override, message in bad:
        with pytest.raises(ValidationError, match=message):
            JobConfig.model_validate(_config(**override))


def _chat(reply: str = "4") -> str:
    return json.dumps(
        {"messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": reply}]}
    )


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", ":2: not JSON"),
        ("[1, 2]", ":2: a line must be a JSON object"),
        ('{"messages": []}', ":2: 'messages' must be a non-empty list"),
        ('{"messages": [{"role": "robot", "content": "x"}]}', ":2: message 0: role must be"),
        ('{"messages": [{"role": "user", "content": "x"}]}', ":2: the last message must be"),
        ('{"messages": [{"role": "user", "content": 3}]}', ":2: message 0: content must be"),
    ],
)
def test_a_malformed_jsonl_line_is_one_line_naming_it(
    tmp_path: Path, line: str, message: str
) -> None:
    path = tmp_path / "chats.jsonl"
    path.write_text(f"{_chat()}\n{line}\n{_chat()}\n")
    with pytest.raises(ConfigError) as info:
        load_chat_jsonl(path)
    text = str(info.value)
    assert text.startswith(f"{path}:2: ")
    assert message in text
    assert "\n" not in text


def test_chat_jsonl_loads_and_splits(tmp_path: Path) -> None:
    path = tmp_path / "chats.jsonl"
    path.write_text("\n".join(_chat(str(i)) for i in range(10)) + "\n\n")
    chats = load_chat_jsonl(path)
    assert [c[-1]["content"] for c in chats] == [str(i) for i in range(10)]
    train, val = hold_out(chats, 0.2, seed=1)
    assert len(train) == 8
    assert len(val) == 2
    assert sorted(c[-1]["content"] for c in train + val) == [str(i) for i in range(10)]
    row = prompt_completion(chats[0])
    assert row["completion"] == [{"role": "assistant", "content": "0"}]
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(ConfigError, match="no chat examples"):
        load_chat_jsonl(empty)


def test_adapter_model_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMERY_ADAPTER_DIR", str(tmp_path))
    assert catalog.split_adapter_name("smollm2-135m+j-1") == ("smollm2-135m", "j-1")
    assert catalog.split_adapter_name("smollm2-135m") == ("smollm2-135m", None)
    with pytest.raises(ConfigError):
        catalog.split_adapter_name("+j-1")
    assert catalog.list_adapters() == []
    catalog.adapter_file("smollm2-135m", "j-1").write_bytes(b"GGUF")
    (tmp_path / "unknown-model+j-2.gguf").write_bytes(b"GGUF")
    listed = catalog.list_adapters()
    assert [(a.name, a.base, a.job_id, a.size) for a in listed] == [
        ("smollm2-135m+j-1", "smollm2-135m", "j-1", 4)
    ]
    with pytest.raises((ModelNotInstalledError, ConfigError), match=r"j-9|not installed"):
        catalog.installed_adapter("smollm2-135m+j-9")


def test_emery_train_type_sft_refuses_a_bad_line_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from bad_input_support import run_cli

    from emery.store import SQLiteStore

    (tmp_path / "chats.jsonl").write_text(_chat() + '\n{"messages": [{"role": "user"}]}\n')
    (tmp_path / "job.toml").write_text(
        '[dataset]\ntask = "word_problems"\n\n[sft]\ndata = "chats.jsonl"\n\n'
        '[lm.task]\nmodel = "local/smollm2-135m"\n'
    )
    db = tmp_path / "emery.db"
    args = ["train", str(tmp_path / "job.toml"), "--type", "sft", "--store", str(db)]
    assert run_cli(args) != 0  # in process: the one line, not the process, is checked
    out, err = capsys.readouterr()
    assert out == ""
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "chats.jsonl:2: message 0: content is missing" in lines[0]
    assert SQLiteStore(db).list_jobs().items == []


def test_a_source_job_without_usable_rollouts_names_only_wider_settings() -> None:
    from emery.store import MemoryStore
    from emery.store.records import NewJob
    from emery.training.data import job_conversations

    store = MemoryStore()
    job = store.create_job(NewJob(id="j-p", name="p", kind="prompt", algorithm="mipro", config={}))
    for state in ("queued", "running"):
        store.transition(job.id, state)
    store.transition(job.id, "succeeded")
    with pytest.raises(ConfigError) as caught:
        job_conversations(store, job.id, candidate="all", splits=("train",), min_score=1.0)
    message = str(caught.value)
    assert message.endswith('try a lower sft.min_score or sft.splits = ["train", "val"]')
    with pytest.raises(ConfigError, match=r"try a lower sft\.min_score$"):
        job_conversations(store, job.id, candidate="all", splits=("train", "val"), min_score=1)
