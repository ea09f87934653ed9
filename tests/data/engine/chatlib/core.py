"""``Chat.load``: what the user calls."""

from __future__ import annotations

from chatlib.model.gpt import GPT


class Chat:
    def load(self, model: str) -> None:
        self.gpt = GPT()
        self.gpt.load_pretrained(model)
