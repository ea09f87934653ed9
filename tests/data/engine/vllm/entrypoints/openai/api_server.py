"""The OpenAI-compatible server: builds the engine from ``vllm serve``'s flags.

As vllm/entrypoints/openai/api_server.py@v0.6.0: ``run_server`` makes ``AsyncEngineArgs`` from
the parsed flags and ``build_async_engine_client_from_engine_args`` calls
``AsyncLLMEngine.from_engine_args`` (api_server.py:133). The stand-in stops once the engine
started; it serves nothing.
"""

from __future__ import annotations

import argparse

from vllm.engine.arg_utils import AsyncEngineArgs
from vllm.engine.async_llm_engine import AsyncLLMEngine
from vllm.usage.usage_lib import UsageContext


def build_async_engine_client_from_engine_args(engine_args: AsyncEngineArgs) -> AsyncLLMEngine:
    return AsyncLLMEngine.from_engine_args(
        engine_args, usage_context=UsageContext.OPENAI_API_SERVER
    )


def run_server(args: argparse.Namespace) -> None:
    engine_args = AsyncEngineArgs.from_cli_args(args)
    build_async_engine_client_from_engine_args(engine_args)


if __name__ == "__main__":
    parser = AsyncEngineArgs.add_cli_args(argparse.ArgumentParser())
    run_server(parser.parse_args())
