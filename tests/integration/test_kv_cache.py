"""The KV-cache advisor end to end: `errkb explain` with flags, and the hook in a child process."""

from __future__ import annotations

import json
import textwrap

from helpers import SEED_MESSAGE, run_cli, run_python

from errkb.units import GIB


def test_cli_explain_with_model_and_gpu_flags(llama_dir):
    """The issue's command: --model DIR --gpu-memory 24GiB --gpu-memory-utilization 0.9 --json."""
    proc = run_cli(
        "explain",
        SEED_MESSAGE,
        "--model",
        str(llama_dir),
        "--gpu-memory",
        "24GiB",
        "--gpu-memory-utilization",
        "0.9",
        "--json",
        "--no-probes",
    )
    assert 0 == proc.returncode, proc.stderr
    facts = {f["name"]: f for f in json.loads(proc.stdout)["facts"]}
    # 0.9 + 2.5 GiB / 24 GiB = 1.00417 -> 1.01: more than the whole GPU, so cap the length.
    assert (1.01, "computed") == (
        facts["gpu_memory_utilization_needed"]["value"],
        facts["gpu_memory_utilization_needed"]["source"],
    )
    assert 12288 == facts["max_model_len_that_fits"]["value"]
    assert ("flag", 24 * GIB) == (
        facts["gpu_memory_total"]["source"],
        facts["gpu_memory_total"]["value"],
    )


def test_cli_bad_gpu_memory_is_a_usage_error():
    """--gpu-memory lots: exit 2 with the expectation."""
    proc = run_cli("explain", SEED_MESSAGE, "--gpu-memory", "lots")
    assert 2 == proc.returncode
    assert b"expected a size such as 24GiB" in proc.stderr


def test_end_to_end_hook_rewrites_the_users_multiline_call(tmp_path):
    """A child installs the hook; an engine raises inside a multi-line EngineArgs(...) call."""
    app = tmp_path / "serve.py"
    app.write_text(
        textwrap.dedent(
            """
        import errkb
        from errkb import Options
        from errkb.testing import FakeGpu, FakeMeasurements
        errkb.install(Options(measurements=FakeMeasurements(gpus=[FakeGpu(total_bytes=80 * 2**30, free_bytes=80 * 2**30)])))
        import transformers


        class CacheConfig:
            def __init__(self, block_size, gpu_memory_utilization):
                self.block_size = block_size
                self.gpu_memory_utilization = gpu_memory_utilization
                self.cache_dtype = "auto"


        class ModelConfig:
            def __init__(self, max_model_len):
                self.max_model_len = max_model_len
                self.hf_config = transformers.LlamaConfig(
                    num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8, hidden_size=4096)
                self.dtype = "bfloat16"


        class EngineArgs:
            def __init__(self, model, max_model_len, gpu_memory_utilization):
                self.cache_config = CacheConfig(16, gpu_memory_utilization)
                self.model_config = ModelConfig(max_model_len)
                self._init_cache()

            def _init_cache(self):
                num_gpu_blocks = 768
                raise ValueError(
                    f"The model's max seq len ({self.model_config.max_model_len}) is larger than the maximum "
                    f"number of tokens that can be stored in KV cache ({16 * num_gpu_blocks}). Try increasing "
                    "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."
                )


        engine = EngineArgs(
            model="/models/llama-3-8b",
            max_model_len=32768,
            gpu_memory_utilization=0.5,
        )
        """
        )
    )
    proc = run_python(
        f"import runpy; runpy.run_path({str(app)!r}, run_name='__main__')",
        env={"NO_COLOR": "1", "COLUMNS": "120"},
    )
    err = proc.stderr.decode()
    assert 1 == proc.returncode
    assert "ValueError: The model's max seq len (32768)" in err
    assert "\n  computed: kv_bytes_per_token = 128 KiB;" in err
    assert "; gpu_memory_utilization_needed = 0.54" in " ".join(err.split())
    assert "Raise gpu_memory_utilization from 0.5 to 0.54" in err
    assert f"Example fix ({app}:" in err
    assert "    gpu_memory_utilization=0.54," in err
    assert "    gpu_memory_utilization=0.5," in err  # the before


def test_cli_probe_and_explain_agree_on_the_cache_of_one_token(tmp_path):
    """errkb probe and errkb explain use one arithmetic: the same bytes a token for fp8_e5m2 and
    for a float32 checkpoint (16 bits under dtype='auto'), where they disagreed before."""
    for dtype, kv, expected in (("bfloat16", "fp8_e5m2", 65536), ("float32", None, 131072)):
        config = {
            "model_type": "llama",
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "hidden_size": 4096,
            "torch_dtype": dtype,
        }
        (tmp_path / "config.json").write_text(json.dumps(config))
        flags = ["--kv-cache-dtype", kv] if kv else []
        probe = run_cli("probe", "--json", "--model", str(tmp_path), *flags)
        explain = run_cli(
            "explain", SEED_MESSAGE, "--json", "--no-probes", "--model", str(tmp_path), *flags
        )
        assert (0, 0) == (probe.returncode, explain.returncode), probe.stderr + explain.stderr
        facts = {f["name"]: f["value"] for f in json.loads(explain.stdout)["facts"]}
        assert (expected, expected) == (
            json.loads(probe.stdout)["model"]["kv_bytes_per_token"],
            facts["kv_bytes_per_token"],
        )
