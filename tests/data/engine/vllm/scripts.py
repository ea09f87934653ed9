"""The ``vllm`` command: ``vllm serve MODEL [flags]`` (vllm/scripts.py:27@v0.6.0)."""

from __future__ import annotations

import argparse

from vllm.engine.arg_utils import AsyncEngineArgs, EngineArgs
from vllm.entrypoints.openai.api_server import run_server


def serve(args: argparse.Namespace) -> None:
    if args.model != EngineArgs.model:
        raise ValueError(
            "With `vllm serve`, you should provide the model as a "
            "positional argument instead of via the `--model` option."
        )
    args.model = args.model_tag
    run_server(args)


def main() -> None:
    parser = argparse.ArgumentParser(prog="vllm")
    subparsers = parser.add_subparsers(required=True, dest="subparser")
    serve_parser = subparsers.add_parser("serve")
    serve_parser.add_argument("model_tag", type=str)
    AsyncEngineArgs.add_cli_args(serve_parser)
    serve_parser.set_defaults(dispatch_function=serve)
    args = parser.parse_args()
    args.dispatch_function(args)
