"""``LLM``: the offline entry point; its keywords go to ``EngineArgs`` (entrypoints/llm.py:177@v0.6.0)."""

from __future__ import annotations

from typing import Any

from vllm.engine.arg_utils import EngineArgs
from vllm.engine.llm_engine import LLMEngine
from vllm.usage.usage_lib import UsageContext


class LLM:
    def __init__(self, model: str, **kwargs: Any) -> None:
        engine_args = EngineArgs(model=model, **kwargs)
        self.llm_engine = LLMEngine.from_engine_args(
            engine_args, usage_context=UsageContext.LLM_CLASS
        )
