"""The KV-cache advisor, with injected measurements and numbers worked out by hand.

The reference model is Llama-3-8B-shaped: 32 layers, 8 KV heads of 128, bf16, so one token takes
2 x 32 x 8 x 128 x 2 = 131072 bytes (128 KiB) and a 16-token block 2 MiB. Each number case
names the vLLM source (file:line@version) its expected value was worked from.
"""

from __future__ import annotations

import math
import textwrap

import pytest
from helpers import SEED_MESSAGE

import errkb
from errkb import Options
from errkb.testing import FakeGpu, FakeMeasurements
from errkb.units import GIB

NO_GPU = FakeMeasurements(gpus=[])
#: One 80 GiB GPU with 79 GiB free, the issue's reference machine.
GPU_80GIB = FakeMeasurements(gpus=[FakeGpu(total_bytes=80 * GIB, free_bytes=79 * GIB)])
V1_GIB = (
    "To serve at least one request with the models's max seq len (32768), (4.00 GiB KV cache is needed, "
    "which is larger than the available KV cache memory (1.50 GiB). Based on the available memory, the "
    "estimated maximum model length is 12288. Try increasing `gpu_memory_utilization` or decreasing "
    "`max_model_len` when initializing the engine."
)
V1_GB = (
    "To serve at least one request with the models's max seq len (32768), (4.00 GB KV cache is needed, "
    "which is larger than the available KV cache memory (1.50 GB). Try increasing `gpu_memory_utilization` "
    "or decreasing `max_model_len` when initializing the engine."
)
NO_BLOCKS = "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine."
FREE = (
    "Free memory on device (12.4/79.19 GiB) on startup is less than desired GPU memory utilization (0.9, 71.27 GiB). "
    "Decrease GPU memory utilization or reduce GPU memory used by other processes."
)
CPU = (
    "The model's max seq len (131072) is larger than the maximum number of tokens that can be stored in KV cache "
    "(32768). Try increasing `VLLM_CPU_KVCACHE_SPACE` or decreasing `max_model_len` when initializing the engine."
)


def _facts(d) -> dict[str, dict]:
    return {f["name"]: f for f in d.to_dict()["facts"]}


def _explain(text, **given):
    measurements = given.pop("measurements", NO_GPU)
    return errkb.explain(text, options=Options(given=given, measurements=measurements))


def test_message_only_gives_the_length_that_fits_and_no_invented_bytes():
    """Only the message: 12288 tokens fit, 20480 missing; no byte figure without a model."""
    d = _explain(SEED_MESSAGE)
    facts = _facts(d)
    assert ("message", 32768) == (facts["max_model_len"]["source"], facts["max_model_len"]["value"])
    assert (12288, "computed") == (
        facts["max_model_len_that_fits"]["value"],
        facts["max_model_len_that_fits"]["source"],
    )
    assert 20480 == facts["kv_cache_deficit_tokens"]["value"]
    assert "default" == facts["block_size"]["source"]
    assert "kv_cache_deficit_bytes" not in facts
    assert "gpu_memory_utilization_needed" not in facts
    assert {"max_model_len": 12288} == d.to_dict()["solutions"][0]["settings"]
    assert any("GPU not measured" in n for n in d.notes)


def test_issue_example_llama_80_gib_at_half_utilization(llama_dir):
    """Deficit 20480 tokens = 2.5 GiB; 0.5 + 2.5/80 = 0.53125 -> 0.54 on an 80 GiB GPU."""
    d = _explain(
        SEED_MESSAGE,
        model=str(llama_dir),
        gpu_memory_utilization=0.5,
        measurements=GPU_80GIB,
    )
    facts = _facts(d)
    assert 131072 == facts["kv_bytes_per_token"]["value"]
    assert 16 * 131072 == facts["kv_block_bytes"]["value"]
    assert 20480 * 131072 == facts["kv_cache_deficit_bytes"]["value"] == int(2.5 * GIB)
    assert (0.54, "computed") == (
        facts["gpu_memory_utilization_needed"]["value"],
        facts["gpu_memory_utilization_needed"]["source"],
    )
    assert ("gpu", 80 * GIB) == (
        facts["gpu_memory_total"]["source"],
        facts["gpu_memory_total"]["value"],
    )
    assert ("flag", 0.5) == (
        facts["gpu_memory_utilization"]["source"],
        facts["gpu_memory_utilization"]["value"],
    )
    solutions = d.to_dict()["solutions"]
    assert {"gpu_memory_utilization": 0.54} == solutions[0]["settings"]
    assert {"max_model_len": 12288} == solutions[1]["settings"]
    assert "0.5 to 0.54" in solutions[0]["text"]


def test_fp8_estimate_doubles_the_tokens_in_the_same_memory(llama_dir):
    """12288 tokens of bf16 cache hold 24576 tokens in fp8: an estimate, and labelled so."""
    d = _explain(SEED_MESSAGE, model=str(llama_dir), gpu_memory_bytes=80 * GIB)
    fp8 = next(s for s in d.to_dict()["solutions"] if s["settings"].get("kv_cache_dtype") == "fp8")
    assert (True, 24576) == (fp8["estimate"], fp8["settings"]["max_model_len"])


def test_default_utilization_is_stated_as_an_assumption(llama_dir):
    """No utilization measured or given: 0.9 is assumed, said so, and used: 0.9 + 2.5/24 -> 1.01, infeasible."""
    d = _explain(SEED_MESSAGE, model=str(llama_dir), gpu_memory_bytes=24 * GIB)
    facts = _facts(d)
    assert ("default", 0.9) == (
        facts["gpu_memory_utilization"]["source"],
        facts["gpu_memory_utilization"]["value"],
    )
    assert "assumed" in facts["gpu_memory_utilization"]["note"]
    assert 1.01 == facts["gpu_memory_utilization_needed"]["value"]
    assert "infeasible" in facts["gpu_memory_utilization_needed"]["note"]
    assert "gpu_memory_utilization" not in {
        k for s in d.to_dict()["solutions"] for k in s["settings"]
    }


def test_v1_gib_message_recomputes_needed_from_the_model(llama_dir):
    """V1: needed = 32768 x 131072 = 4 GiB; "1.50 GiB" available is at least 1.495 GiB; fits 12288 (vLLM's estimate)."""
    d = _explain(
        V1_GIB,
        model=str(llama_dir),
        gpu_memory_utilization=0.5,
        measurements=GPU_80GIB,
    )
    facts = _facts(d)
    assert (4 * GIB, "computed") == (
        facts["needed_kv_cache_memory"]["value"],
        facts["needed_kv_cache_memory"]["source"],
    )
    assert 4 * GIB - math.ceil(1.495 * GIB) == facts["kv_cache_deficit_bytes"]["value"]
    assert (12288, "message") == (
        facts["max_model_len_that_fits"]["value"],
        facts["max_model_len_that_fits"]["source"],
    )
    assert 0.54 == facts["gpu_memory_utilization_needed"]["value"]


def test_v1_needed_utilization_above_free_memory_is_infeasible(llama_dir):
    """V1 needs utilization x total free at start: 0.54 x 80 GiB = 43.2 GiB > 30 GiB free."""
    d = _explain(
        V1_GIB,
        model=str(llama_dir),
        gpu_memory_utilization=0.5,
        measurements=FakeMeasurements(gpus=[FakeGpu(total_bytes=80 * GIB, free_bytes=30 * GIB)]),
    )
    fact = _facts(d)["gpu_memory_utilization_needed"]
    assert 0.54 == fact["value"]
    assert "free memory now" in fact["note"]
    assert {"max_model_len": 12288} == d.to_dict()["solutions"][0]["settings"]


def test_v1_gb_wording_is_read_as_gib():
    """vLLM 0.7-0.8.2 printed GiB figures labelled GB: at most 4.005 - at least 1.495 'GB' of GiB."""
    d = _explain(V1_GB, gpu_memory_utilization=0.5, gpu_memory_bytes=80 * GIB)
    facts = _facts(d)
    assert (
        math.floor(4.005 * GIB) - math.ceil(1.495 * GIB) == facts["kv_cache_deficit_bytes"]["value"]
    )
    assert "GiB even where it prints 'GB'" in facts["needed_kv_cache_memory"]["note"]
    assert 0.54 == facts["gpu_memory_utilization_needed"]["value"]


def test_free_memory_below_utilization_gives_the_largest_utilization_that_fits():
    """12.4 free of 79.19 GiB: 0.1565... rounded down -> 0.15."""
    d = _explain(FREE)
    facts = _facts(d)
    assert 0.15 == facts["gpu_memory_utilization_that_fits"]["value"]
    assert {"gpu_memory_utilization": 0.15} == d.to_dict()["solutions"][0]["settings"]


def test_cpu_backend_variant_sizes_the_cache_space(llama_dir):
    """131072 tokens x 131072 bytes = 16 GiB: VLLM_CPU_KVCACHE_SPACE=16."""
    d = _explain(CPU, model=str(llama_dir))
    assert {"VLLM_CPU_KVCACHE_SPACE": 16} == d.to_dict()["solutions"][0]["settings"]
    assert "VLLM_CPU_KVCACHE_SPACE=16" in d.to_dict()["example_fix"]["after"]


def test_tensor_parallel_estimate_over_visible_gpus(llama_dir):
    """4 GPUs: 2 KV heads per GPU, 32768 bytes/token; the same 1.5 GiB holds 49152 tokens (at least)."""
    gpus = [FakeGpu(index=i, total_bytes=24 * GIB, free_bytes=24 * GIB) for i in range(4)]
    d = _explain(SEED_MESSAGE, model=str(llama_dir), measurements=FakeMeasurements(gpus=gpus))
    tp = next(s for s in d.to_dict()["solutions"] if "tensor_parallel_size" in s["settings"])
    assert ({"tensor_parallel_size": 4}, True) == (tp["settings"], tp["estimate"])
    assert 49152 == _facts(d)["max_model_len_that_fits_tp"]["value"]


class _Obj:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def _engine_error(cache_config, model_config, parallel_config=None, filename="engine.py"):
    """Raise the old engine's error from a frame whose self holds the engine's configs."""
    src = textwrap.dedent(
        """
        class LLMEngine:
            def __init__(self, cache_config, model_config, parallel_config):
                self.cache_config = cache_config
                self.model_config = model_config
                self.parallel_config = parallel_config

            def _init_cache(self):
                num_gpu_blocks = self.cache_config.num_gpu_blocks
                max_seq_len = self.cache_config.block_size * num_gpu_blocks
                raise ValueError(
                    f"The model's max seq len ({self.model_config.max_model_len}) is larger than the maximum "
                    f"number of tokens that can be stored in KV cache ({max_seq_len}). Try increasing "
                    "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."
                )
        """
    )
    namespace: dict = {}
    exec(compile(src, filename, "exec"), namespace)
    engine = namespace["LLMEngine"](cache_config, model_config, parallel_config)
    try:
        engine._init_cache()
    except ValueError as exc:
        return exc
    raise AssertionError("no error")


def test_engine_objects_in_frames_are_read(llama_dir):
    """Frames: utilization 0.5, 768 blocks of 16, a real LlamaConfig: the same numbers, sourced 'frame'."""
    transformers = pytest.importorskip("transformers")
    import torch

    hf = transformers.LlamaConfig(
        num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8, hidden_size=4096
    )
    exc = _engine_error(
        _Obj(block_size=16, gpu_memory_utilization=0.5, num_gpu_blocks=768, cache_dtype="auto"),
        _Obj(max_model_len=32768, hf_config=hf, dtype=torch.bfloat16),
        _Obj(tensor_parallel_size=1),
    )
    d = errkb.diagnose(
        exc,
        options=Options(
            measurements=FakeMeasurements(gpus=[FakeGpu(total_bytes=80 * GIB, free_bytes=80 * GIB)])
        ),
    )
    facts = _facts(d)
    assert {"frame"} == {
        facts[k]["source"]
        for k in ("max_model_len", "block_size", "num_gpu_blocks", "gpu_memory_utilization")
    }
    assert ("model-config", 8) == (facts["num_kv_heads"]["source"], facts["num_kv_heads"]["value"])
    assert 0.54 == facts["gpu_memory_utilization_needed"]["value"]
    assert {"gpu_memory_utilization": 0.54} == d.to_dict()["solutions"][0]["settings"]


def test_chattts_engine_is_never_offered_a_kv_cache_dtype():
    """ChatTTS's vendored engine has no cache_dtype: no fp8 solution, and its own record wins."""
    transformers = pytest.importorskip("transformers")
    hf = transformers.LlamaConfig(
        num_hidden_layers=20, num_attention_heads=12, num_key_value_heads=12, hidden_size=768
    )
    exc = _engine_error(
        _Obj(
            block_size=16, gpu_memory_utilization=0.9, num_gpu_blocks=100, swap_space_bytes=4 * GIB
        ),
        _Obj(max_model_len=4096, hf_config=hf, dtype="float16"),
        filename="/venv/site-packages/ChatTTS/model/velocity/llm_engine.py",
    )
    d = errkb.diagnose(
        exc, options=Options(measurements=FakeMeasurements(gpus=[FakeGpu(total_bytes=8 * GIB)]))
    )
    assert "chattts-kv-cache-max-seq-len" == d.top.record.id
    settings = [s["settings"] for s in d.to_dict()["solutions"]]
    assert all("kv_cache_dtype" not in s for s in settings)
    # 4096 tokens need 256 blocks, 100 exist: 156 x 16 tokens x (2*20*12*64*2 = 61440 bytes).
    assert 156 * 16 * 61440 == _facts(d)["kv_cache_deficit_bytes"]["value"]
