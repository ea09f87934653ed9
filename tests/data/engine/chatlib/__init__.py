"""A stand-in for a library that builds an LLM engine itself, shaped as ChatTTS 0.2.5 is.

Its users never call the engine: ``Chat().load(model)`` does, through ``GPT.load_pretrained``,
which imports the engine from the library's vendored copy inside the function (as
ChatTTS/model/gpt.py:67 does) and passes settings of its own. A fix cannot go into that call;
it has to reach the engine from the user's file.
"""

from chatlib.core import Chat

__all__ = ["Chat"]
