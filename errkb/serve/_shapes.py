"""Common model shapes for the console's picker: the ``config.json`` fields the KV cache needs.

Each entry is data copied from the model's published ``config.json`` (``source`` says which),
trimmed to what :func:`errkb.probes.model.model_shape` reads. The page offers them so that an
engineer can say "the customer runs Llama 3.1 70B" without finding the file.
"""

from __future__ import annotations

from typing import Any

__all__ = ["MODEL_SHAPES"]

_HF = "https://huggingface.co/{}/blob/main/config.json"

#: name -> where the figures come from, and the config.
MODEL_SHAPES: tuple[dict[str, Any], ...] = (
    {
        "name": "Llama-3.1-8B",
        "source": _HF.format("meta-llama/Llama-3.1-8B"),
        "config": {
            "model_type": "llama",
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "hidden_size": 4096,
            "torch_dtype": "bfloat16",
            "max_position_embeddings": 131072,
        },
    },
    {
        "name": "Llama-3.1-70B",
        "source": _HF.format("meta-llama/Llama-3.1-70B"),
        "config": {
            "model_type": "llama",
            "num_hidden_layers": 80,
            "num_attention_heads": 64,
            "num_key_value_heads": 8,
            "hidden_size": 8192,
            "torch_dtype": "bfloat16",
            "max_position_embeddings": 131072,
        },
    },
    {
        "name": "Mistral-7B-v0.1",
        "source": _HF.format("mistralai/Mistral-7B-v0.1"),
        "config": {
            "model_type": "mistral",
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "hidden_size": 4096,
            "sliding_window": 4096,
            "torch_dtype": "bfloat16",
            "max_position_embeddings": 32768,
        },
    },
    {
        "name": "Qwen2-7B",
        "source": _HF.format("Qwen/Qwen2-7B"),
        "config": {
            "model_type": "qwen2",
            "num_hidden_layers": 28,
            "num_attention_heads": 28,
            "num_key_value_heads": 4,
            "hidden_size": 3584,
            "sliding_window": 131072,
            "use_sliding_window": False,
            "torch_dtype": "bfloat16",
            "max_position_embeddings": 131072,
        },
    },
    {
        "name": "Gemma-3-27B",
        "source": _HF.format("google/gemma-3-27b-it"),
        "config": {
            "model_type": "gemma3_text",
            "num_hidden_layers": 62,
            "num_attention_heads": 32,
            "num_key_value_heads": 16,
            "head_dim": 128,
            "hidden_size": 5376,
            "sliding_window": 1024,
            "sliding_window_pattern": 6,
            "torch_dtype": "bfloat16",
            "max_position_embeddings": 131072,
        },
    },
    {
        "name": "DeepSeek-V3",
        "source": _HF.format("deepseek-ai/DeepSeek-V3"),
        "config": {
            "model_type": "deepseek_v3",
            "num_hidden_layers": 61,
            "num_attention_heads": 128,
            "num_key_value_heads": 128,
            "hidden_size": 7168,
            "kv_lora_rank": 512,
            "qk_rope_head_dim": 64,
            "qk_nope_head_dim": 128,
            "torch_dtype": "bfloat16",
            "max_position_embeddings": 163840,
        },
    },
)
