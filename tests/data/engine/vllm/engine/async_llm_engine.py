"""``AsyncLLMEngine``: the server's engine, built in process (async_llm_engine.py:717@v0.6.0)."""

from __future__ import annotations

from vllm.engine.arg_utils import AsyncEngineArgs
from vllm.engine.llm_engine import LLMEngine
from vllm.usage.usage_lib import UsageContext


class AsyncLLMEngine:
    def __init__(self, engine: LLMEngine) -> None:
        self.engine = engine

    @classmethod
    def from_engine_args(
        cls,
        engine_args: AsyncEngineArgs,
        start_engine_loop: bool = True,
        usage_context: UsageContext = UsageContext.ENGINE_CONTEXT,
    ) -> AsyncLLMEngine:
        del start_engine_loop  # the stand-in serves nothing
        return cls(LLMEngine.from_engine_args(engine_args, usage_context=usage_context))
