from __future__ import annotations

import json
import time

import pytest

from errkb.exceptions import UsageError
from errkb.probes import run_bounded
from errkb.probes.gpu import probe_gpus
from errkb.probes.model import kv_bytes_per_token, model_shape, read_model_path

transformers = pytest.importorskip("transformers")


def _bpt(config, *, cache_bytes=2, tp=1):
    shape = model_shape(config, origin="test")
    return kv_bytes_per_token(shape, cache_dtype_bytes=cache_bytes, tensor_parallel_size=tp)


def test_llama_3_8b_shape_is_131072_bytes_per_token():
    """32 layers x 8 KV heads x 128 x 2 (K, V) x 2 bytes = 131072."""
    config = transformers.LlamaConfig(
        num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8, hidden_size=4096
    )
    assert 2 * 32 * 8 * 128 * 2 == _bpt(config) == 131072


def test_mistral_7b_shape():
    """Mistral 7B: 32 layers, 8 KV heads, head 128: 131072 bytes per token."""
    config = transformers.MistralConfig(
        num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8, hidden_size=4096
    )
    assert 131072 == _bpt(config)


def test_qwen2_7b_shape():
    """Qwen2 7B: 28 layers, 4 KV heads, head 3584/28 = 128: 2*28*4*128*2 = 57344."""
    config = transformers.Qwen2Config(
        num_hidden_layers=28, num_attention_heads=28, num_key_value_heads=4, hidden_size=3584
    )
    assert 57344 == _bpt(config)


def test_gpt2_uses_its_own_attribute_names():
    """GPT-2 (n_layer 12, n_head 12, n_embd 768, no GQA): 2*12*12*64*2 = 36864."""
    assert 36864 == _bpt(transformers.GPT2Config())


def test_explicit_head_dim_wins_over_hidden_over_heads():
    """Gemma 7B: head_dim 256 although 3072/16 = 192: 2*28*16*256*2 = 458752."""
    config = transformers.GemmaConfig(
        num_hidden_layers=28,
        num_attention_heads=16,
        num_key_value_heads=16,
        head_dim=256,
        hidden_size=3072,
    )
    shape = model_shape(config, origin="test")
    assert (256, True) == (shape.head_dim, shape.head_dim_explicit)
    assert 458752 == _bpt(config)


def test_tensor_parallel_splits_kv_heads_but_never_below_one():
    """8 KV heads over TP 4 -> 2 per GPU; over TP 16 -> still 1 per GPU (replicated)."""
    config = transformers.LlamaConfig(
        num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8, hidden_size=4096
    )
    assert 2 * 32 * 2 * 128 * 2 == _bpt(config, tp=4)
    assert 2 * 32 * 1 * 128 * 2 == _bpt(config, tp=16)


def test_mla_caches_one_latent_per_layer():
    """MLA (DeepSeek-V3-like): 61 layers x (512 + 64) x 2 bytes = 70272, no separate V."""
    config = {
        "num_hidden_layers": 61,
        "num_attention_heads": 128,
        "hidden_size": 7168,
        "kv_lora_rank": 512,
        "qk_rope_head_dim": 64,
    }
    assert 61 * 576 * 2 == _bpt(config)


def test_hybrid_models_count_only_attention_layers():
    """layer_types with linear-attention layers: only full/sliding attention layers cache KV."""
    config = {
        "num_hidden_layers": 4,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "hidden_size": 512,
        "layer_types": ["full_attention", "linear_attention", "linear_attention", "full_attention"],
    }
    assert 2 == model_shape(config, origin="t").attention_layers


def test_local_model_folder_is_read_without_the_hub(tmp_path):
    """A saved config folder is read from disk; the dtype comes along."""
    transformers.Qwen2Config(
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        hidden_size=64,
        torch_dtype="bfloat16",
    ).save_pretrained(tmp_path)
    shape = read_model_path(tmp_path)
    assert (2, 2, 16, "bfloat16") == (
        shape.attention_layers,
        shape.num_kv_heads,
        shape.head_dim,
        shape.dtype,
    )


def test_missing_model_path_is_a_clear_usage_error(tmp_path):
    """A path that is not here is an error that says errkb reads local configs only."""
    with pytest.raises(UsageError, match="local configs only, never the hub"):
        read_model_path(tmp_path / "meta-llama" / "Llama-3-8B")


def test_config_without_layers_is_rejected(tmp_path):
    """A config.json that is not a transformer's says what is missing."""
    (tmp_path / "config.json").write_text(json.dumps({"foo": 1}))
    with pytest.raises(UsageError, match="num_hidden_layers"):
        read_model_path(tmp_path)


def test_gpu_probe_on_the_cpu_build_says_why_there_is_nothing():
    """With the CPU build of torch the probe returns no devices and a reason, never raises."""
    reading = probe_gpus(timeout=30)
    assert () == reading.devices
    assert "CUDA" in reading.error


def test_run_bounded_gives_up_on_a_hanging_call():
    """A query that hangs (a broken driver) is abandoned after the timeout, with a reason."""
    start = time.monotonic()
    value, reason = run_bounded(lambda: time.sleep(30), 0.2, "the GPU query")
    assert (None, "the GPU query did not answer within 0.2s") == (value, reason)
    assert time.monotonic() - start < 5


def test_run_bounded_reports_a_failure():
    """A query that raises gives its reason instead."""
    assert (None, "probe failed (OSError: no driver)") == run_bounded(
        lambda: (_ for _ in ()).throw(OSError("no driver")), 5, "probe"
    )
