"""The KV-cache advisor, with injected measurements and numbers worked out by hand.

The reference model is Llama-3-8B-shaped: 32 layers, 8 KV heads of 128, bf16, so one token takes
2 x 32 x 8 x 128 x 2 = 131072 bytes (128 KiB) and a 16-token block 2 MiB. Each number case
names the vLLM source (file:line@version) its expected value was worked from.
"""

from __future__ import annotations

import json
import math
import textwrap

import pytest
from helpers import DEEPSEEK_V3, GEMMA3, LLAMA, SEED_MESSAGE

import errkb
from errkb import Options
from errkb.advisors.kv_cache import _inputs, layout_for_model, longest_length, needed_bytes
from errkb.advisors.kv_cache._arithmetic import printed_range, stage_layers
from errkb.probes.model import model_shape
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


# --- Number cases: each expected value worked from vLLM's source at the version named. ---

#: vLLM 0.9.1-0.12 wording (kv_cache_utils.py:572-579@v0.9.1), its figures for the Gemma case.
GEMMA_V1 = (
    "To serve at least one request with the models's max seq len (131072), (13.66 GiB KV cache "
    "is needed, which is larger than the available KV cache memory (12.00 GiB). Based on the "
    "available memory, the estimated maximum model length is 109280. Try increasing "
    "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."
)
#: vLLM 0.8.4-0.9.0 wording, without the estimate (kv_cache_utils.py:541-557@v0.9.0).
LLAMA_V090 = (
    "To serve at least one request with the models's max seq len (131072), (16.00 GiB KV cache "
    "is needed, which is larger than the available KV cache memory (9.47 GiB). Based on the "
    "available memory,  Try increasing `gpu_memory_utilization` or decreasing `max_model_len` "
    "when initializing the engine."
)
#: vLLM 0.22 on (kv_cache_utils.py:760-770@v0.24.0): 'model's' and the CPU backend's mention.
LLAMA_V024 = (
    "To serve at least one request with the model's max seq len (32768), (4.0 GiB KV cache is "
    "needed, which is larger than the available KV cache memory (3.5 GiB). Based on the "
    "available memory, the estimated maximum model length is 28672. Try increasing "
    "`gpu_memory_utilization` (which also controls CPU memory on the CPU backend) or decreasing "
    "`max_model_len` when initializing the engine. See "
    "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."
)
#: vLLM 0.13 to 0.20.2: the link to the docs, 'models's' (default 0.9 to 0.19.1, 0.92 from 0.20.0).
LLAMA_V013 = LLAMA_V024.replace("the model's", "the models's").replace(
    " (which also controls CPU memory on the CPU backend)", ""
)


def _model(tmp_path, config, weights: int | None = None) -> str:
    (tmp_path / "config.json").write_text(json.dumps(config))
    if weights is not None:
        with (tmp_path / "model.safetensors").open("wb") as f:
            f.truncate(weights)
    return str(tmp_path)


def _solution(d, key):
    return next(s for s in d.to_dict()["solutions"] if key in s["settings"])


def test_printed_sizes_stand_for_a_range_of_bytes():
    """vLLM prints GiB with two decimals: "9.47" is 9.465 to 9.475 GiB, in whole bytes."""
    assert (math.ceil(9.465 * GIB), math.floor(9.475 * GIB)) == printed_range(9.47)


def test_no_blocks_gives_at_least_a_utilization_from_the_gpu_total_and_the_weights(tmp_path):
    """Zero blocks is a clamp (worker.py:110@v0.2.7): at least (4 GiB of cache + 16 GiB weights) / 24 GiB.

    32768 tokens are 2048 blocks of 2 MiB = 4 GiB; (4 + 16) / 24 = 0.8333 -> 0.84, above
    0.5 + (4 GiB - 2 MiB) / 24 GiB = 0.6666 from the run's utilization alone.
    """
    config = dict(LLAMA, max_position_embeddings=32768)
    d = _explain(
        NO_BLOCKS,
        model=_model(tmp_path, config, weights=16 * GIB),
        gpu_memory_utilization=0.5,
        gpu_memory_bytes=24 * GIB,
    )
    fact = _facts(d)["gpu_memory_utilization_needed"]
    assert 0.84 == fact["value"]
    assert fact["note"].startswith("at least")
    solution = _solution(d, "gpu_memory_utilization")
    assert (True, {"gpu_memory_utilization": 0.84}) == (solution["estimate"], solution["settings"])
    assert "to at least 0.84" in solution["text"]
    # With the least peak vLLM can have measured (the weights), 0.84 gives every block needed.
    blocks = int((24 * GIB * 0.84 - 16 * GIB) // (2 << 20))
    assert blocks >= 2048


def test_no_blocks_without_weights_is_still_a_lower_bound(tmp_path):
    """Without weight files: 0.5 + (2048 - 1) blocks x 2 MiB / 24 GiB = 0.66658 -> 0.67, at least."""
    config = dict(LLAMA, max_position_embeddings=32768)
    d = _explain(
        NO_BLOCKS,
        model=_model(tmp_path, config),
        gpu_memory_utilization=0.5,
        gpu_memory_bytes=24 * GIB,
    )
    facts = _facts(d)
    assert (0.67, "model-config") == (
        facts["gpu_memory_utilization_needed"]["value"],
        facts["max_model_len"]["source"],
    )
    assert "at least" in facts["kv_cache_deficit_bytes"]["note"]


def test_explicit_float32_dtype_caches_four_bytes_a_value():
    """dtype='float32' given: model_config.dtype is float32 and an 'auto' cache follows it
    (cache_engine.py:114-118@v0.6.6): 2 x 32 x 8 x 128 x 4 = 262144 bytes a token."""
    transformers = pytest.importorskip("transformers")
    import torch

    hf = transformers.LlamaConfig(
        num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8, hidden_size=4096
    )
    exc = _engine_error(
        _Obj(block_size=16, gpu_memory_utilization=0.5, num_gpu_blocks=768, cache_dtype="auto"),
        _Obj(max_model_len=32768, hf_config=hf, dtype=torch.float32),
    )
    d = errkb.diagnose(exc, options=Options(measurements=GPU_80GIB))
    facts = _facts(d)
    assert (4, "frame") == (
        facts["kv_cache_dtype_bytes"]["value"],
        facts["kv_cache_dtype_bytes"]["source"],
    )
    assert 262144 == facts["kv_bytes_per_token"]["value"]
    # 768 blocks of 16 hold 12288 tokens; 20480 more at 256 KiB = 5 GiB; 0.5 + 5/80 = 0.5625.
    assert 0.57 == facts["gpu_memory_utilization_needed"]["value"]


def test_float32_checkpoint_without_explicit_dtype_caches_two_bytes(tmp_path):
    """A float32 config.json served with dtype='auto' runs in 16 bits (config.py:423-429@v0.2.7)."""
    d = _explain(SEED_MESSAGE, model=_model(tmp_path, dict(LLAMA, torch_dtype="float32")))
    facts = _facts(d)
    assert (2, 131072) == (
        facts["kv_cache_dtype_bytes"]["value"],
        facts["kv_bytes_per_token"]["value"],
    )


def test_gemma3_sliding_window_needs_13_66_gib_and_0_93(tmp_path):
    """The issue's case: SlidingWindowSpec.max_memory_usage_bytes (kv_cache_interface.py:138-154@v0.9.1).

    Full: 10 layers x 8192 blocks x 128 KiB = 10 GiB. Sliding: min(1023 + 8192, 131072) = 9215
    tokens -> 576 + 1 blocks x 128 KiB x 52 layers = 3.6626 GiB. 13.6626 GiB needed, 11.995 GiB
    at least available: 0.9 + 1.6676 / 80 = 0.920845 -> 0.93 (errkb said 1.53 before).
    """
    d = _explain(GEMMA_V1, model=_model(tmp_path, GEMMA3), measurements=GPU_80GIB)
    facts = _facts(d)
    assert (10 * GIB + 52 * 577 * 131072, "computed") == (
        facts["needed_kv_cache_memory"]["value"],
        facts["needed_kv_cache_memory"]["source"],
    )
    assert (8192, 52) == (
        facts["max_num_batched_tokens"]["value"],
        facts["sliding_window_layers"]["value"],
    )
    assert ("default", 0.9) == (
        facts["gpu_memory_utilization"]["source"],
        facts["gpu_memory_utilization"]["value"],
    )
    assert 0.93 == facts["gpu_memory_utilization_needed"]["value"]
    assert {"gpu_memory_utilization": 0.93} == d.to_dict()["solutions"][0]["settings"]


def test_gemma3_longest_length_is_the_one_vllm_estimates():
    """12 GiB hold 109280 tokens of the Gemma shape, as estimate_max_model_len finds (kv_cache_utils.py:493-535@v0.9.1)."""
    sized, _ = layout_for_model(model_shape(GEMMA3, origin="t"))
    fits = longest_length(sized.layout, 12 * GIB, limit=131072, batched=8192)
    assert 109280 == fits
    assert needed_bytes(sized.layout, fits, batched=8192) <= 12 * GIB
    assert needed_bytes(sized.layout, fits + 1, batched=8192) > 12 * GIB


class _Spec:
    def __init__(self, page_size_bytes, block_size=16, sliding_window=None):
        self.page_size_bytes = page_size_bytes
        self.block_size = block_size
        self.sliding_window = sliding_window


class FullAttentionSpec(_Spec):
    pass


class SlidingWindowSpec(_Spec):
    pass


def _v1_error(kv_cache_spec, available_memory, vllm_config, message):
    """Raise a V1 message from a frame of vllm/v1/core/kv_cache_utils.py holding the spec."""
    src = textwrap.dedent(
        """
        def check_enough_kv_cache_memory(vllm_config, kv_cache_spec, available_memory, message):
            max_model_len = vllm_config.model_config.max_model_len
            raise ValueError(message)
        """
    )
    namespace: dict = {}
    exec(compile(src, "/venv/site-packages/vllm/v1/core/kv_cache_utils.py", "exec"), namespace)
    try:
        namespace["check_enough_kv_cache_memory"](
            vllm_config, kv_cache_spec, available_memory, message
        )
    except ValueError as exc:
        return exc
    raise AssertionError("no error")


def test_gemma3_spec_in_the_frames_is_summed_layer_by_layer():
    """The engine's own kv_cache_spec: 10 full + 52 sliding layers, max_num_batched_tokens 8192."""
    page = 16 * 2 * 16 * 128 * 2
    spec = {
        f"layers.{i}": FullAttentionSpec(page)
        if (i + 1) % 6 == 0
        else SlidingWindowSpec(page, sliding_window=1024)
        for i in range(62)
    }
    config = _Obj(
        model_config=_Obj(max_model_len=131072, dtype="bfloat16"),
        cache_config=_Obj(block_size=16, gpu_memory_utilization=0.9, cache_dtype="auto"),
        scheduler_config=_Obj(max_num_batched_tokens=8192),
        parallel_config=_Obj(tensor_parallel_size=1, pipeline_parallel_size=1),
    )
    exc = _v1_error(spec, 12 * GIB, config, GEMMA_V1)
    d = errkb.diagnose(exc, options=Options(measurements=GPU_80GIB))
    facts = _facts(d)
    assert (12 * GIB, "frame") == (
        facts["available_kv_cache_memory"]["value"],
        facts["available_kv_cache_memory"]["source"],
    )
    assert 10 * GIB + 52 * 577 * page == facts["needed_kv_cache_memory"]["value"]
    # 0.9 + 1.6626 / 80 = 0.92078 -> 0.93.
    assert 0.93 == facts["gpu_memory_utilization_needed"]["value"]


def test_v1_rounding_gives_a_length_vllm_accepts(tmp_path):
    """The issue's case: "9.47 GiB" may be 10,164,040,105 bytes, which hold 4846 blocks of 2 MiB.

    The upper reading (4848 blocks, 77568 tokens) needs 10,166,992,896 bytes: too many. The
    least 9.47 can stand for (9.465 GiB) holds 77536 tokens, which vLLM accepts.
    """
    d = _explain(LLAMA_V090, model=_model(tmp_path, LLAMA), measurements=GPU_80GIB)
    facts = _facts(d)
    fits = facts["max_model_len_that_fits"]["value"]
    assert 77536 == fits
    assert fits // 16 * (2 << 20) <= 10_164_040_105 < 77568 // 16 * (2 << 20)
    assert "vLLM 0.8.4 to 0.9.0" == facts["vllm_release"]["value"]
    assert {"max_model_len": 77536} == _solution(d, "max_model_len")["settings"]


def test_cpu_backend_wording_means_the_092_default(tmp_path):
    """The wording with the CPU backend comes from 0.22 on, whose default is 0.92 (config/cache.py:66@v0.20.0).

    4.005 GiB at most needed, 3.495 at least available: 0.92 + 0.51 / 80 = 0.92638 -> 0.93,
    never "raise from 0.9 to 0.91".
    """
    d = _explain(LLAMA_V024, model=_model(tmp_path, LLAMA), measurements=GPU_80GIB)
    facts = _facts(d)
    assert (0.92, "default") == (
        facts["gpu_memory_utilization"]["value"],
        facts["gpu_memory_utilization"]["source"],
    )
    solution = _solution(d, "gpu_memory_utilization")
    assert "from 0.92 to 0.93" in solution["text"]


def test_wording_of_both_defaults_takes_the_higher(tmp_path):
    """0.13 to 0.20.2 print the same words with 0.9 or 0.92: the proposal starts from 0.92."""
    d = _explain(LLAMA_V013, model=_model(tmp_path, LLAMA), measurements=GPU_80GIB)
    solution = _solution(d, "gpu_memory_utilization")
    assert "from the default (0.9 or 0.92, by release) to 0.93" in solution["text"]


def test_installed_vllm_tells_the_default(tmp_path, monkeypatch):
    """An installed vLLM 0.19.1 (importlib.metadata) in the wording's range: its default, 0.9."""
    monkeypatch.setattr(_inputs, "installed_version", lambda name: "0.19.1")
    d = _explain(LLAMA_V013, model=_model(tmp_path, LLAMA), measurements=GPU_80GIB)
    facts = _facts(d)
    assert ("vLLM 0.19.1", "probe") == (
        facts["vllm_release"]["value"],
        facts["vllm_release"]["source"],
    )
    assert 0.9 == facts["gpu_memory_utilization"]["value"]
    assert "from 0.9 to 0.91" in _solution(d, "gpu_memory_utilization")["text"]


def test_installed_vllm_outside_the_wordings_range_is_not_believed(tmp_path, monkeypatch):
    """vLLM 0.9.2 installed cannot have printed the 0.22 wording: a note, and 0.92 stays."""
    monkeypatch.setattr(_inputs, "installed_version", lambda name: "0.9.2")
    d = _explain(LLAMA_V024, model=_model(tmp_path, LLAMA), measurements=GPU_80GIB)
    assert 0.92 == _facts(d)["gpu_memory_utilization"]["value"]
    assert any("vLLM 0.9.2 is installed here, but" in n for n in d.notes)


def test_pipeline_parallel_caches_the_layers_of_one_stage():
    """pipeline_parallel_size=2: 16 of 32 layers a GPU (get_num_layers, config.py:262-264@v0.2.7)."""
    transformers = pytest.importorskip("transformers")
    hf = transformers.LlamaConfig(
        num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8, hidden_size=4096
    )
    exc = _engine_error(
        _Obj(block_size=16, gpu_memory_utilization=0.5, num_gpu_blocks=768, cache_dtype="auto"),
        _Obj(max_model_len=32768, hf_config=hf, dtype="bfloat16"),
        _Obj(tensor_parallel_size=1, pipeline_parallel_size=2),
    )
    d = errkb.diagnose(exc, options=Options(measurements=GPU_80GIB))
    facts = _facts(d)
    assert (16, 65536) == (
        facts["attention_layers_per_stage"]["value"],
        facts["kv_bytes_per_token"]["value"],
    )


def test_pipeline_stages_split_as_the_release_splits():
    """34 layers over 4 stages: 8,9,9,8 from 0.8.0 (utils.py:118-124@v0.9.0), 8,8,8,10 before."""
    assert [8, 9, 9, 8] == [len(r) for r in stage_layers(34, 4, balanced=True)]
    assert [8, 8, 8, 10] == [len(r) for r in stage_layers(34, 4, balanced=False)]


def test_mla_fp8_ds_mla_page_and_no_gain_from_tensor_parallelism(tmp_path):
    """fp8_ds_mla: 656 bytes a token a layer (kv_cache_interface.py:331-338@v0.20.0); the latent
    is the same on every GPU, so 4 GPUs give no tensor-parallel solution."""
    gpus = [FakeGpu(index=i, total_bytes=80 * GIB, free_bytes=80 * GIB) for i in range(4)]
    d = _explain(
        LLAMA_V024.replace("(32768)", "(163840)"),
        model=_model(tmp_path, DEEPSEEK_V3),
        kv_cache_dtype="fp8_ds_mla",
        measurements=FakeMeasurements(gpus=gpus),
    )
    facts = _facts(d)
    assert 61 * 656 == facts["kv_bytes_per_token"]["value"]
    assert {"num_kv_heads", "head_dim"}.isdisjoint(facts)
    assert 576 == facts["mla_latent_dim"]["value"]
    assert all("tensor_parallel_size" not in s["settings"] for s in d.to_dict()["solutions"])
    assert any("does not shrink an MLA cache" in n for n in d.notes)


def test_mla_latent_is_not_split_by_tensor_parallelism():
    """bf16 latent: 61 x 576 x 2 bytes a token at tensor_parallel_size 1 and 8 alike."""
    shape = model_shape(DEEPSEEK_V3, origin="t")
    one, _ = layout_for_model(shape)
    eight, _ = layout_for_model(shape, tensor_parallel_size=8)
    assert 61 * 576 * 2 == one.layout.bytes_per_token == eight.layout.bytes_per_token


@pytest.mark.parametrize(
    ("release", "head"),
    [("0.6.6", 256), ("0.7.0", 192), ("0.7.1", None)],
)
def test_v0_before_the_mla_cache_caches_padded_heads(tmp_path, monkeypatch, release, head):
    """V0 DeepSeek heads: 256 padded before 0.7.0 (config.py:719-726@v0.6.6), qk_nope + qk_rope
    in 0.7.0 (config.py:737-743@v0.7.0), the latent from 0.7.1 (config.py:747-753@v0.7.1)."""
    monkeypatch.setattr(_inputs, "installed_version", lambda name: release)
    d = _explain(SEED_MESSAGE, model=_model(tmp_path, DEEPSEEK_V3))
    bpt = _facts(d)["kv_bytes_per_token"]["value"]
    expected = 61 * 576 * 2 if head is None else 2 * 61 * 128 * head * 2
    assert expected == bpt


def test_hybrid_jamba_caches_its_attention_layers_only(tmp_path):
    """Jamba: 4 of 32 layers attend (period 8, offset 4): 2 x 4 x 8 x 128 x 2 = 16384 bytes a token."""
    config = dict(LLAMA, model_type="jamba", attn_layer_period=8, attn_layer_offset=4)
    d = _explain(SEED_MESSAGE, model=_model(tmp_path, config))
    assert 16384 == _facts(d)["kv_bytes_per_token"]["value"]


def test_llava_text_defaults_fill_the_shape(tmp_path):
    """llava's text_config without counts: LlamaConfig's defaults (32 layers, 32 heads of 128)."""
    pytest.importorskip("transformers")
    config = {"model_type": "llava", "text_config": {"model_type": "llama"}}
    d = _explain(SEED_MESSAGE, model=_model(tmp_path, config))
    facts = _facts(d)
    assert 2 * 32 * 32 * 128 * 2 == facts["kv_bytes_per_token"]["value"]
    assert "LlamaConfig defaults" in facts["attention_layers"]["note"]


def test_swapped_numbers_are_a_note_not_advice():
    """ "max seq len (12288) ... KV cache (32768)": never "lower max_model_len from 12288 to 32768"."""
    d = _explain(SEED_MESSAGE.replace("32768", "X").replace("12288", "32768").replace("X", "12288"))
    assert [] == [s for s in d.to_dict()["solutions"] if s["settings"]]
    assert d.top.example_fix is None
    assert any("contradict each other" in n for n in d.notes)


def test_zero_kv_heads_is_a_note_not_arithmetic(tmp_path):
    """num_key_value_heads 0: the config is named in a note and no byte figure is made up."""
    d = _explain(SEED_MESSAGE, model=_model(tmp_path, dict(LLAMA, num_key_value_heads=0)))
    assert "kv_bytes_per_token" not in _facts(d)
    assert any("'num_key_value_heads': expected a positive integer, got 0" in n for n in d.notes)


def test_utilization_above_one_is_a_note_not_a_proposal(llama_dir):
    """--gpu-memory-utilization 1.5: vLLM refuses it, so no utilization is worked out from it."""
    d = _explain(
        SEED_MESSAGE, model=str(llama_dir), gpu_memory_utilization=1.5, measurements=GPU_80GIB
    )
    assert "gpu_memory_utilization_needed" not in _facts(d)
    assert any("outside (0, 1]" in n for n in d.notes)
    assert "1.5" not in (d.to_dict()["example_fix"] or {}).get("after", "")


def test_no_free_memory_at_start_is_a_note_not_zero():
    """0.0 of 79.19 GiB free: never "lower gpu_memory_utilization to 0"."""
    d = _explain(FREE.replace("12.4/", "0.0/"))
    assert [] == [s for s in d.to_dict()["solutions"] if s["settings"]]
    assert any("free the GPU first" in n for n in d.notes)


def test_probe_and_advisor_agree_on_fp8_variants(llama_dir):
    """kv_cache_dtype=fp8_e5m2: one byte a value for errkb probe's arithmetic and the advisor's."""
    d = _explain(SEED_MESSAGE, model=str(llama_dir), kv_cache_dtype="fp8_e5m2")
    sized, size = layout_for_model(model_shape(LLAMA, origin="t"), kv_cache_dtype="fp8_e5m2")
    assert (1, 65536) == (size, sized.layout.bytes_per_token)
    assert 65536 == _facts(d)["kv_bytes_per_token"]["value"]


def test_no_blocks_reads_the_weights_the_worker_loaded():
    """V0's worker keeps the weights it loaded (model_runner.model_memory_usage,
    model_runner.py:1098@v0.6.6): at least (4 GiB + 74 GiB) / 80 GiB = 0.975 -> 0.98, above
    0.9 + (4 GiB - 2 MiB) / 80 GiB = 0.94998 from the run's utilization alone."""
    transformers = pytest.importorskip("transformers")
    hf = transformers.LlamaConfig(
        num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8, hidden_size=4096
    )
    src = textwrap.dedent(
        """
        class Worker:
            def __init__(self, cache_config, model_config, model_runner):
                self.cache_config = cache_config
                self.model_config = model_config
                self.model_runner = model_runner

            def initialize_cache(self, num_gpu_blocks):
                raise ValueError(
                    "No available memory for the cache blocks. Try increasing "
                    "`gpu_memory_utilization` when initializing the engine."
                )
        """
    )
    namespace: dict = {}
    exec(compile(src, "/venv/site-packages/vllm/worker/worker.py", "exec"), namespace)
    worker = namespace["Worker"](
        _Obj(block_size=16, gpu_memory_utilization=0.9, cache_dtype="auto"),
        _Obj(max_model_len=32768, hf_config=hf, dtype="bfloat16"),
        _Obj(model_memory_usage=74 * GIB),
    )
    with pytest.raises(ValueError) as info:
        worker.initialize_cache(0)
    d = errkb.diagnose(info.value, options=Options(measurements=GPU_80GIB))
    facts = _facts(d)
    assert (74 * GIB, "frame") == (
        facts["weights_bytes"]["value"],
        facts["weights_bytes"]["source"],
    )
    assert 0.98 == facts["gpu_memory_utilization_needed"]["value"]
    assert facts["gpu_memory_utilization_needed"]["note"].startswith("at least")


def test_v1_no_blocks_with_the_frames_available_memory_is_exact():
    """V1 raises at available_memory <= 0 (kv_cache_utils.py:531-534@v0.9.0); with its value in the
    frame the fix is exact: 0.9 + (4 GiB + 1 GiB) / 80 GiB = 0.9625 -> 0.97, no "at least"."""
    page = 16 * 2 * 8 * 128 * 2
    spec = {f"layers.{i}": FullAttentionSpec(page) for i in range(32)}
    config = _Obj(
        model_config=_Obj(max_model_len=32768, dtype="bfloat16"),
        cache_config=_Obj(block_size=16, gpu_memory_utilization=0.9, cache_dtype="auto"),
        scheduler_config=_Obj(max_num_batched_tokens=8192),
        parallel_config=_Obj(tensor_parallel_size=1, pipeline_parallel_size=1),
    )
    exc = _v1_error(spec, -GIB, config, NO_BLOCKS)
    d = errkb.diagnose(exc, options=Options(measurements=GPU_80GIB))
    fact = _facts(d)["gpu_memory_utilization_needed"]
    assert 0.97 == fact["value"]
    assert not fact["note"].startswith("at least")
    assert "to 0.97:" in _solution(d, "gpu_memory_utilization")["text"]


def test_a_paste_cut_before_the_docs_link_keeps_the_wordings_range():
    """A 0.22-on wording (the CPU backend's mention) pasted without its trailing link is a cut
    paste, not a 0.12 release: its range stays 0.22.0 or later, never "0.22.0 to 0.12.0"."""
    from errkb.advisors.kv_cache._eras import era_of

    cut = LLAMA_V024.split(" See https://", maxsplit=1)[0]
    assert cut.endswith("when initializing the engine.")
    era, _ = era_of("v1", cut, None, None)
    assert "vLLM 0.22.0 or later" == era.describe()
    assert (0.92,) == era.default_utilizations()
    old, _ = era_of("v1", LLAMA_V090, None, None)  # 0.9.0's wording: no link, and it is old
    assert "vLLM 0.8.4 to 0.9.0" == old.describe()
    for text in (LLAMA_V024, LLAMA_V013, LLAMA_V090, cut, LLAMA_V013.split(" See https://")[0]):
        era, _ = era_of("v1", text, None, None)
        assert era.low is None or era.high is None or era.low <= era.high, era.describe()


def test_a_capture_that_is_not_a_number_is_a_note_not_a_crash():
    """A record's pattern that captures "3488.5" as the cache's tokens: the KV advisor reads it
    through the contract's Captures, which report it as a note; no figure comes from it."""
    from errkb.testing import record_dict, registry_from_dicts

    record = record_dict(
        id="acme-kv-cache",
        messagePattern=r"stored in KV cache \((?P<max_seq_len>[\d.]+)\)",
        advisors=["kv-cache"],
    )
    text = SEED_MESSAGE.replace("(12288)", "(3488.5)")
    d = errkb.explain(
        text, options=Options(measurements=NO_GPU), registry=registry_from_dicts([record])
    )
    assert ["acme-kv-cache"] == [f.record.id for f in d.findings]
    assert any("capture 'max_seq_len' is not a whole number: 3488.5" in n for n in d.notes), d.notes
    assert "kv_cache_capacity" not in _facts(d)


#: vLLM's V0 profile as a user reported it (zero blocks, the paste wrapped by hand), and a V0
#: start's lines as an unsloth run printed them: real reports' text.
REPORTED_V0_NO_BLOCKS = """\
22:07:58  INFO [model_runner.py:1115] Model loading took 6.5935 GiB and 7.243515 seconds
22:12:16  INFO [worker.py:295] Memory profiling takes 257.11 seconds
22:12:16  INFO [worker.py:295] model weights take 6.59GiB; non_torch_memory takes 8.29GiB;
                               PyTorch activation peak memory takes 4.93GiB;
                               the rest of the memory reserved for KV Cache is -7.83GiB.
22:12:16  INFO [executor_base.py:118] Maximum concurrency for 4096 tokens per request: 0.00x
"""
REPORTED_V0_START = (
    "INFO 08-12 22:32:11 [worker.py:295] the current vLLM instance can use total_gpu_memory "
    "(47.50GiB) x gpu_memory_utilization (0.78) = 37.18GiB\n"
    "INFO 08-12 22:32:11 [worker.py:295] model weights take 0.52GiB; non_torch_memory takes "
    "0.08GiB; PyTorch activation peak memory takes 1.78GiB; the rest of the memory reserved for "
    "KV Cache is 34.81GiB.\n"
)
REPORTED_V1_RANKS = (
    "(VllmWorker rank=0 pid=11) INFO Available KV cache memory: 10.50 GiB\n"
    "(VllmWorker rank=1 pid=12) INFO Available KV cache memory: 10.50 GiB\n"
)


def test_vllms_profile_lines_give_what_was_left_for_the_cache():
    """Each wording vLLM printed gives the left-over (negative when the profile overshot), and
    the total and utilization where the line prints them; text without the lines gives None."""
    from errkb.advisors.kv_cache._profile import read_profile

    no_blocks = read_profile(REPORTED_V0_NO_BLOCKS)
    assert ("vllm-v0", -7.83, 6.59, 8.29, 4.93, None) == (
        no_blocks.engine,
        no_blocks.cache,
        no_blocks.weights,
        no_blocks.non_torch,
        no_blocks.activation,
        no_blocks.total,
    )
    start = read_profile(REPORTED_V0_START)
    assert (34.81, 47.5, 0.78) == (start.cache, start.total, start.utilization)
    ranks = read_profile(REPORTED_V1_RANKS)
    assert ("vllm-v1", 10.5) == (ranks.engine, ranks.cache)
    assert read_profile(SEED_MESSAGE) is None


def test_a_pasted_no_blocks_profile_gives_an_exact_utilization_not_a_least_one(tmp_path):
    """The reported V0 paste with its error, for a Llama-3-8B shape (131072 tokens, 16 GiB) on
    an 80 GiB GPU at the default 0.9: the log's -7.83 GiB (at least -7.835) gives 0.9 + 23.835 /
    80 = 1.198, so 1.2, infeasible, and said without "at least"."""
    text = f"{REPORTED_V0_NO_BLOCKS}ValueError: {NO_BLOCKS}\n"
    d = _explain(text, model=_model(tmp_path, LLAMA), measurements=GPU_80GIB)
    facts = _facts(d)
    assert ("message", math.ceil(-7.835 * GIB)) == (
        facts["kv_cache_memory_left"]["source"],
        facts["kv_cache_memory_left"]["value"],
    )
    needed = facts["gpu_memory_utilization_needed"]
    assert 1.2 == needed["value"]
    assert needed["note"].startswith("1.19794 rounded up; infeasible")


def _batch_text(d) -> str:
    """The solution about max_num_batched_tokens."""
    found = [s["text"] for s in d.to_dict()["solutions"] if "vLLM's profiling run" in s["text"]]
    assert 1 == len(found), d.to_dict()["solutions"]
    return found[0]


def test_a_reported_activation_peak_below_the_deficit_is_said_not_to_suffice(tmp_path):
    """The reported paste: its activation peak (4.93 GiB) is far less than the 23.8 GiB the
    cache lacks, so no smaller max_num_batched_tokens is proposed, and the advice says why."""
    text = f"{REPORTED_V0_NO_BLOCKS}ValueError: {NO_BLOCKS}\n"
    d = _explain(text, model=_model(tmp_path, LLAMA), measurements=GPU_80GIB)
    assert [] == [s for s in d.to_dict()["solutions"] if "max_num_batched_tokens" in s["settings"]]
    said = _batch_text(d)
    assert "cannot make up for it alone" in said
    assert "4.93 GiB" in said
    assert math.ceil(4.925 * GIB) == _facts(d)["activation_peak_bytes"]["value"]


def test_without_the_peak_the_batch_is_said_without_a_number(llama_dir):
    """The V0 message alone, max_model_len 32768: vLLM profiles max(32768, 2048) tokens without
    chunked prefill; a smaller batch is named, with no value, and the log line that would give one."""
    d = _explain(SEED_MESSAGE, model=str(llama_dir), measurements=GPU_80GIB)
    facts = _facts(d)
    assert (32768, "computed") == (
        facts["max_num_batched_tokens"]["value"],
        facts["max_num_batched_tokens"]["source"],
    )
    said = _batch_text(d)
    assert "(32768 tokens here)" in said
    assert "enable_chunked_prefill=True" in said
    assert "'PyTorch activation peak memory takes <size>'" in said
    assert [] == [s for s in d.to_dict()["solutions"] if "max_num_batched_tokens" in s["settings"]]


def test_above_32k_a_v0_release_may_have_chunked_by_itself():
    """131072 tokens in the V0 wording: vLLM 0.5.3 to 0.10.2 turn chunked prefill on above 32768
    (vllm/engine/arg_utils.py:1081-1108@v0.6.6), so the profile's batch is not assumed to be
    the whole length, and the advice says so."""
    text = SEED_MESSAGE.replace("(32768)", "(131072)")
    d = _explain(text)
    assert "max_num_batched_tokens" not in _facts(d)
    assert "vLLM 0.5.3 to 0.10.2 turn chunked prefill on" in _batch_text(d)


def test_the_batch_line_and_the_v1_debug_peak_give_a_smaller_batch():
    """V1: "Chunked prefill is enabled with max_num_batched_tokens=8192" and the DEBUG profile's
    "torch peak memory increase: 2.00GiB" (at least 1.995 GiB) against 1.005 GiB lacking (4.00
    needed, 3.00 available): 8192 x (1 - 1.005 / 1.995) = 4065, down to 3584."""
    text = (
        "INFO 12-02 10:00:00 [config.py:2196] Chunked prefill is enabled with "
        "max_num_batched_tokens=8192.\n"
        "DEBUG 12-02 10:00:01 [gpu_worker.py:226] Memory profiling takes 1.27 seconds. Total non "
        "KV cache memory: 69.00GiB; torch peak memory increase: 2.00GiB; non-torch forward "
        "increase memory: 1.00GiB; weights memory: 66.00GiB.\n"
        "ValueError: " + V1_GIB.replace("(1.50 GiB)", "(3.00 GiB)")
    )
    d = _explain(text)
    batch = next(s for s in d.to_dict()["solutions"] if "max_num_batched_tokens" in s["settings"])
    assert {"max_num_batched_tokens": 3584} == batch["settings"]
    assert batch["estimate"]
    assert ("message", 8192) == (
        _facts(d)["max_num_batched_tokens"]["source"],
        _facts(d)["max_num_batched_tokens"]["value"],
    )


def test_notes_name_where_each_surface_takes_the_figure():
    """An assumed block size and utilization say how to give them on every surface: the CLI's
    flag, the console's and API's what_if field, Given from Python (issue 26, item 5)."""
    d = _explain(SEED_MESSAGE)
    facts = _facts(d)
    for name in ("block_size", "gpu_memory_utilization"):
        note = facts[name]["note"]
        flag = "--" + name.replace("_", "-")
        assert f"{flag} on the command line, what_if.{name} in the console or the API" in note
        assert f"Given({name}=...) from Python" in note
        assert "pass --" not in note


@pytest.mark.parametrize("interval", [4, None])
def test_full_attention_interval_counts_one_layer_in_each_interval(interval):
    """A Qwen3-Next config.json that gives full_attention_interval (or, for its model_type,
    nothing: transformers' default 4) and no layer_types: 12 of 48 layers cache KV, as the
    layer_types transformers' Qwen3NextConfig builds from it say (vLLM reads those)."""
    transformers = pytest.importorskip("transformers")
    config = {
        "model_type": "qwen3_next",
        "num_hidden_layers": 48,
        "num_attention_heads": 16,
        "num_key_value_heads": 2,
        "hidden_size": 2048,
        "head_dim": 256,
    }
    if interval is not None:
        config["full_attention_interval"] = interval
    expected = transformers.Qwen3NextConfig(**config).layer_types
    shape = model_shape(config, origin="config.json")
    assert [i for i, k in enumerate(expected) if k == "full_attention"] == [
        i for i, k in enumerate(shape.layer_kinds) if k == "full"
    ]
    assert 12 == shape.attention_layers


def test_gemma2_even_layers_slide_as_transformers_lists_them():
    """Gemma 2 (46 layers, window 4096): even layers slide (vLLM's gemma2.py:149@v0.9.0), the
    same layers transformers' Gemma2Config lists as sliding_attention; 23 of each."""
    transformers = pytest.importorskip("transformers")
    config = {
        "model_type": "gemma2",
        "num_hidden_layers": 46,
        "num_attention_heads": 32,
        "num_key_value_heads": 16,
        "hidden_size": 4608,
        "head_dim": 128,
        "sliding_window": 4096,
    }
    expected = transformers.Gemma2Config(**config).layer_types
    shape = model_shape(config, origin="config.json")
    assert [k.split("_")[0] for k in expected] == list(shape.layer_kinds)
    assert (23, 23) == (shape.layer_kinds.count("sliding"), shape.layer_kinds.count("full"))
