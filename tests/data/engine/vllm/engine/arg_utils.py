"""``EngineArgs``: the keywords an engine accepts (vllm/engine/arg_utils.py@v0.6.0).

A dataclass, as in vLLM, so a keyword it lacks is a TypeError, and ``from_cli_args`` reads the
same names from ``vllm serve``'s flags (arg_utils.py:759). Only the fields the stand-in reads,
plus a few a script commonly passes, are here; the defaults are vLLM's (arg_utils.py:88: a
utilization of 0.90; a block of 16 tokens on CUDA). From 0.20.0 the default utilization is 0.92
(``CacheConfig``, vllm/config/cache.py:66@v0.20.0; ``EngineArgs`` takes it,
vllm/engine/arg_utils.py:502@v0.20.0): ``None`` here stands for "the release's default", taken
when the configs are made, so ``LLM()``, ``EngineArgs`` and ``vllm serve`` share it.

``enable_chunked_prefill``: ``--enable-chunked-prefill`` takes ``True``/``False`` or nothing
(``StoreBoolean``, nargs="?", const="True": arg_utils.py:710-716@v0.6.6, vllm/utils.py:1100
@v0.6.6). Left unset, V0 releases 0.5.3 to 0.10.2 turn it on themselves above 32768 tokens and
say so, and warn of a long context where it stays off (arg_utils.py:1081-1117@v0.6.6; the
stand-in's conditions are the CUDA GPU's, no sliding window); V1 always chunks (arg_utils.py:1523@v0.9.1).
"""

from __future__ import annotations

import argparse
import dataclasses

from vllm import _fake
from vllm.config import (
    CacheConfig,
    EngineConfig,
    ModelConfig,
    ParallelConfig,
    SchedulerConfig,
)


class StoreBoolean(argparse.Action):
    """``True`` or ``False``, as vllm/utils.py:1100-1109@v0.6.6 reads them."""

    def __call__(self, parser, namespace, values, option_string=None):  # type: ignore[no-untyped-def]
        if values.lower() == "true":
            setattr(namespace, self.dest, True)
        elif values.lower() == "false":
            setattr(namespace, self.dest, False)
        else:
            raise ValueError(f"Invalid boolean value: {values}. Expected 'true' or 'false'.")


@dataclasses.dataclass
class EngineArgs:
    model: str = "facebook/opt-125m"
    served_model_name: str | list[str] | None = None
    dtype: str = "auto"
    kv_cache_dtype: str = "auto"
    max_model_len: int | None = None
    block_size: int = 16
    swap_space: float = 4
    gpu_memory_utilization: float | None = None
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    max_num_batched_tokens: int | None = None
    enable_chunked_prefill: bool | None = None
    trust_remote_code: bool = False
    enforce_eager: bool | None = None
    seed: int = 0
    max_num_seqs: int = 256
    disable_log_stats: bool = False

    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
        parser.add_argument("--model", type=str, default=EngineArgs.model)
        parser.add_argument("--served-model-name", nargs="+", default=None)
        parser.add_argument("--dtype", type=str, default=EngineArgs.dtype)
        parser.add_argument("--kv-cache-dtype", type=str, default=EngineArgs.kv_cache_dtype)
        parser.add_argument("--max-model-len", type=int, default=EngineArgs.max_model_len)
        parser.add_argument("--block-size", type=int, default=EngineArgs.block_size)
        parser.add_argument("--swap-space", type=float, default=EngineArgs.swap_space)
        parser.add_argument(
            "--gpu-memory-utilization", type=float, default=EngineArgs.gpu_memory_utilization
        )
        parser.add_argument(
            "--tensor-parallel-size", "-tp", type=int, default=EngineArgs.tensor_parallel_size
        )
        parser.add_argument(
            "--pipeline-parallel-size", "-pp", type=int, default=EngineArgs.pipeline_parallel_size
        )
        parser.add_argument("--max-num-batched-tokens", type=int, default=None)
        parser.add_argument(
            "--enable-chunked-prefill", action=StoreBoolean, nargs="?", const="True", default=None
        )
        parser.add_argument("--trust-remote-code", action="store_true")
        parser.add_argument("--enforce-eager", action="store_true", default=None)
        parser.add_argument("--seed", type=int, default=EngineArgs.seed)
        parser.add_argument("--max-num-seqs", type=int, default=EngineArgs.max_num_seqs)
        parser.add_argument("--disable-log-stats", action="store_true")
        return parser

    @classmethod
    def from_cli_args(cls, args: argparse.Namespace) -> EngineArgs:
        names = [f.name for f in dataclasses.fields(cls)]
        return cls(**{name: getattr(args, name) for name in names if hasattr(args, name)})

    def create_engine_config(self) -> EngineConfig:
        utilization = self.gpu_memory_utilization
        if utilization is None:
            utilization = _fake.default_gpu_memory_utilization()
        model_config = ModelConfig(self.model, self.dtype, self.max_model_len)
        chunked = self.enable_chunked_prefill
        long_context = model_config.max_model_len > 32768
        rule = (0, 5, 3) <= _fake.release() <= (0, 10, 2)
        if _fake.use_v1():
            chunked = True
        elif chunked is None:
            window = getattr(model_config.hf_config, "sliding_window", None)
            chunked = rule and long_context and not window
            if chunked:
                _fake.log(
                    "arg_utils.py",
                    1103,
                    "Chunked prefill is enabled by default for models with "
                    "max_model_len > 32K. Currently, chunked prefill might "
                    "not work with some features or models. If you "
                    "encounter any issues, please disable chunked prefill "
                    "by setting --enable-chunked-prefill=False.",
                    level="WARNING",
                )
        if not _fake.use_v1() and rule and long_context and not chunked:
            _fake.log(
                "arg_utils.py",
                1113,
                f"The model has a long context length ({model_config.max_model_len}). "
                "This may cause OOM errors during the initial memory profiling phase, or "
                "result in low performance due to small KV cache space. Consider setting "
                "--max-model-len to a smaller value.",
                level="WARNING",
            )
        return EngineConfig(
            model_config=model_config,
            cache_config=CacheConfig(
                self.block_size, utilization, self.kv_cache_dtype, self.swap_space
            ),
            parallel_config=ParallelConfig(self.tensor_parallel_size, self.pipeline_parallel_size),
            scheduler_config=SchedulerConfig(
                self.max_num_batched_tokens, model_config.max_model_len, chunked
            ),
        )


@dataclasses.dataclass
class AsyncEngineArgs(EngineArgs):
    disable_log_requests: bool = False

    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
        parser = EngineArgs.add_cli_args(parser)
        parser.add_argument("--disable-log-requests", action="store_true")
        return parser
