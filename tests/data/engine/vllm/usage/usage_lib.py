"""``UsageContext``, which callers pass to ``from_engine_args`` (vllm/usage/usage_lib.py:96@v0.6.0)."""

from enum import Enum


class UsageContext(str, Enum):
    UNKNOWN_CONTEXT = "UNKNOWN_CONTEXT"
    LLM_CLASS = "LLM_CLASS"
    API_SERVER = "API_SERVER"
    OPENAI_API_SERVER = "OPENAI_API_SERVER"
    ENGINE_CONTEXT = "ENGINE_CONTEXT"
