from __future__ import annotations

import json
import time

import pytest
from helpers import GEMMA3

from errkb.exceptions import UsageError
from errkb.probes import run_bounded
from errkb.probes.gpu import probe_gpus
from errkb.probes.model import model_shape, read_model_path

transformers = pytest.importorskip("transformers")


def _shape(config):
    return model_shape(config, origin="test")


def test_llama_3_8b_shape():
    """Llama-3-8B: 32 attention layers, 8 KV heads, head 4096 / 32 = 128."""
    shape = _shape(
        transformers.LlamaConfig(
            num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8, hidden_size=4096
        )
    )
    assert (32, 8, 128, ("full",) * 32) == (
        shape.attention_layers,
        shape.num_kv_heads,
        shape.head_dim,
        shape.layer_kinds,
    )


def test_gpt2_uses_its_own_attribute_names():
    """GPT-2 (n_layer 12, n_head 12, n_embd 768, no GQA): 12 layers of 12 KV heads of 64."""
    shape = _shape(transformers.GPT2Config())
    assert (12, 12, 64) == (shape.attention_layers, shape.num_kv_heads, shape.head_dim)


def test_explicit_head_dim_wins_over_hidden_over_heads():
    """Gemma 7B: head_dim 256 although 3072/16 = 192."""
    config = transformers.GemmaConfig(
        num_hidden_layers=28,
        num_attention_heads=16,
        num_key_value_heads=16,
        head_dim=256,
        hidden_size=3072,
    )
    shape = _shape(config)
    assert (256, True, 3072) == (shape.head_dim, shape.head_dim_explicit, shape.hidden_size)


def test_mla_dimensions_are_read():
    """DeepSeek-V3-like: the latent is kv_lora_rank + qk_rope_head_dim = 576."""
    config = {
        "model_type": "deepseek_v3",
        "num_hidden_layers": 61,
        "num_attention_heads": 128,
        "num_key_value_heads": 128,
        "hidden_size": 7168,
        "kv_lora_rank": 512,
        "qk_rope_head_dim": 64,
        "qk_nope_head_dim": 128,
    }
    shape = _shape(config)
    assert ((512, 64, 128), 576) == (shape.mla, shape.mla_latent_dim)


def test_layer_types_count_only_attention_layers():
    """layer_types with linear-attention layers (Qwen3-Next): only attention layers cache KV."""
    config = {
        "num_hidden_layers": 4,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "hidden_size": 512,
        "layer_types": ["full_attention", "linear_attention", "linear_attention", "full_attention"],
    }
    assert ("full", "none", "none", "full") == _shape(config).layer_kinds


def test_jamba_saved_config_counts_attention_by_period_and_offset():
    """Jamba's config.json: attention where i % attn_layer_period == attn_layer_offset (4 of 32)."""
    config = {
        "model_type": "jamba",
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "hidden_size": 4096,
        "attn_layer_period": 8,
        "attn_layer_offset": 4,
    }
    shape = _shape(config)
    expected = transformers.JambaConfig(**config).layers_block_type
    assert [i for i, k in enumerate(expected) if k == "attention"] == [
        i for i, k in enumerate(shape.layer_kinds) if k == "full"
    ]
    assert 4 == shape.attention_layers


def test_nemotron_h_pattern_counts_the_stars():
    """NemotronH: hybrid_override_pattern "M-M*-M*-" has attention ("*") at layers 3 and 6."""
    config = {
        "model_type": "nemotron_h",
        "num_hidden_layers": 8,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "hidden_size": 512,
        "hybrid_override_pattern": "M-M*-M*-",
    }
    shape = _shape(config)
    assert (2, "full", "full") == (
        shape.attention_layers,
        shape.layer_kinds[3],
        shape.layer_kinds[6],
    )


def test_nemotron_h_8b_has_four_attention_layers_of_52(tmp_path):
    """nvidia/Nemotron-H-8B-Base-8K's pattern (52 layers, 4 "*"): counted from its config.json
    and from transformers' own NemotronHConfig built from it, which also lists the layers."""
    config = {
        "architectures": ["NemotronHForCausalLM"],
        "model_type": "nemotron_h",
        "hybrid_override_pattern": "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-",
        "hidden_size": 4096,
        "num_hidden_layers": 52,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "mamba_num_heads": 128,
        "mamba_head_dim": 64,
        "ssm_state_size": 128,
        "n_groups": 8,
        "conv_kernel": 4,
        "vocab_size": 131072,
        "max_position_embeddings": 8192,
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    live = transformers.AutoConfig.from_pretrained(tmp_path)
    for shape in (read_model_path(tmp_path), _shape(live)):
        assert 4 == shape.attention_layers
        assert [7, 18, 29, 40] == [i for i, k in enumerate(shape.layer_kinds) if k == "full"]


def test_gemma3_every_sixth_layer_is_global():
    """Gemma 3 (62 layers): layers 5, 11, ..., 59 full (10), the other 52 slide over 1024."""
    shape = _shape(transformers.Gemma3TextConfig(num_hidden_layers=62, sliding_window=1024))
    assert (10, 52, 1024) == (
        shape.layer_kinds.count("full"),
        shape.layer_kinds.count("sliding"),
        shape.sliding_window,
    )
    assert "full" == shape.layer_kinds[5]


def test_gemma3_config_without_layer_types_uses_the_pattern():
    """A Gemma 3 config.json with sliding_window_pattern 6 and no layer_types: the same split."""
    shape = _shape(GEMMA3)
    assert (10, 52) == (shape.layer_kinds.count("full"), shape.layer_kinds.count("sliding"))


def test_qwen2_window_is_off_unless_use_sliding_window():
    """Qwen2 configs carry sliding_window but use_sliding_window false: every layer is full."""
    config = transformers.Qwen2Config(
        num_hidden_layers=4, num_attention_heads=4, hidden_size=64, sliding_window=4096
    )
    assert (None, ("full",) * 4) == (_shape(config).sliding_window, _shape(config).layer_kinds)


def test_llava_text_config_defaults_come_from_transformers(tmp_path):
    """llava's config.json gives text_config without layer counts: LlamaConfig's defaults fill them."""
    config = {"model_type": "llava", "text_config": {"model_type": "llama", "vocab_size": 32064}}
    (tmp_path / "config.json").write_text(json.dumps(config))
    shape = read_model_path(tmp_path)
    defaults = transformers.LlamaConfig()
    assert (
        defaults.num_hidden_layers,
        defaults.num_key_value_heads,
        defaults.hidden_size // defaults.num_attention_heads,
    ) == (shape.attention_layers, shape.num_kv_heads, shape.head_dim)
    assert "LlamaConfig defaults" in shape.defaults_from


@pytest.mark.parametrize(
    ("field", "bad"),
    [
        ("num_key_value_heads", 0),
        ("num_key_value_heads", -8),
        ("num_attention_heads", 32.5),
        ("head_dim", 0),
    ],
)
def test_hostile_head_counts_are_usage_errors(field, bad):
    """Zero, negative or fractional head counts: an error naming the field and the value."""
    config = {
        "num_hidden_layers": 4,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "hidden_size": 4096,
        field: bad,
    }
    with pytest.raises(
        UsageError, match=f"field '{field}': expected a positive integer, got {bad}"
    ):
        model_shape(config, origin="config.json")


def test_weights_beside_the_config_are_measured(tmp_path):
    """read_model_path adds the size of the safetensors files beside config.json."""
    (tmp_path / "config.json").write_text(
        json.dumps({"num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64})
    )
    (tmp_path / "model.safetensors").write_bytes(bytes(1000))
    assert 1000 == read_model_path(tmp_path).weights_bytes


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
