"""A stand-in for a library that builds a vLLM engine itself (as ChatTTS's ``Chat.load`` does).

Its users never call the engine: ``Chat().load(model)`` does, with settings of its own, so a fix
cannot go into the call; it has to reach the engine from the user's file.
"""

from chatlib.core import Chat

__all__ = ["Chat"]
