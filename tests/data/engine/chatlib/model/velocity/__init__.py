"""The library's vendored engine (ChatTTS vendors a copy of vLLM 0.2.7); here vLLM's own."""

from vllm import LLM

__all__ = ["LLM"]
