"""``GPT.load_pretrained`` builds the engine with the library's own settings."""

from __future__ import annotations


class GPT:
    def load_pretrained(self, gpt_folder: str) -> None:
        from .velocity import LLM

        self.llm = LLM(model=gpt_folder, gpu_memory_utilization=0.9, max_model_len=32768)
