"""``Chat.load`` builds the engine, importing it where it is needed (as ChatTTS's gpt.py does)."""

from __future__ import annotations


class Chat:
    def load(self, model: str) -> None:
        from vllm import LLM

        self.llm = LLM(model=model, gpu_memory_utilization=0.9, max_model_len=32768)
