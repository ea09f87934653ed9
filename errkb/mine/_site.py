"""What the miner finds: a message template and the place that raises, warns or logs it.

Every reader of a source language (Python's ``ast``, C++ ``TORCH_CHECK`` calls, Rust error
strings) produces :class:`Site` values; the writer turns them into schema-v2 records. A
:class:`Template` is the message as the code builds it: literal text and the holes that are
filled in at run time, so that the record's ``errorMessage`` keeps ``{expr}`` placeholders as
the dataset's mined records do, and its ``messagePattern`` captures each hole.
"""

from __future__ import annotations

from typing import Literal

from errkb._attrs import attrs

__all__ = ["Hole", "Site", "Template"]


@attrs.frozen
class Hole:
    """A part of a message filled in at run time.

    Attributes:
        expr: the expression's source text (``self.model_config.max_model_len``), or ``""``
            when the code gives none (``%s``, ``{}``).
        number: whether the hole always holds a number (a format spec such as ``:.2f`` or
            ``%d`` says so), so the pattern can ask for digits.
    """

    expr: str = ""
    number: bool = False


#: A message as the code builds it: literal strings and holes, in order.
Template = tuple["str | Hole", ...]

#: How the message reaches the user.
Kind = Literal["raise", "check", "warn", "log", "native"]


@attrs.frozen(kw_only=True)
class Site:
    """One message and where a release of a distribution emits it.

    Attributes:
        distribution: the distribution's name (``vllm``).
        version: the release the source belongs to (``0.2.7``).
        path: the file, relative to the distribution's root, with ``/`` separators.
        line: the line of the ``raise`` (or the call that emits the message), 1-based.
        template: the message.
        error_class: the exception class, dotted where it could be resolved
            (``torch.cuda.OutOfMemoryError``), bare otherwise; ``None`` when unknown.
        function: the enclosing function or method (``LLMEngine._init_cache``).
        condition: what holds when the message is emitted, as source text, outermost first,
            joined by `` and ``: the ``if`` tests that guard it, and for a check (``assert``,
            ``torch._check``, ``TORCH_CHECK``), which raises when its condition is false, that
            condition turned round (``a != b`` for ``TORCH_CHECK(a == b)``).
        excerpt: the source lines around the raise.
        excerpt_start: the first line of the excerpt.
        kind: how the message reaches the user (raised, a check, a warning, a log line, native).
        language: ``python``, ``c++`` or ``rust``.
        level: for a log line, the severity its logger method means (``error``, ``warning``).
    """

    distribution: str
    version: str
    path: str
    line: int
    template: Template
    error_class: str | None = None
    function: str | None = None
    condition: str | None = None
    excerpt: str = ""
    excerpt_start: int = 0
    kind: Kind = "raise"
    language: str = "python"
    level: str | None = None
