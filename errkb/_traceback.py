"""Reading live exceptions and frames without running the user's code or keeping it alive.

The helpers every layer above may need: the order of a chain (:func:`walk_chain`), where a
traceback's frames are (:func:`frame_sites`), whether a file is library code
(:func:`is_library_file`), a frame's locals (:class:`FrameView`), attributes read without
running properties (:func:`safe_getattr`), and texts read from objects that may raise
(:func:`safe_text`). A leaf: it imports nothing of errkb.
"""

from __future__ import annotations

import builtins
import os
import sysconfig
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from types import FrameType, TracebackType

__all__ = [
    "MAX_EXCEPTIONS",
    "FrameView",
    "class_name",
    "frame_sites",
    "is_library_file",
    "safe_getattr",
    "safe_text",
    "walk_chain",
]

#: How many exceptions of a chain or group are looked at, at most.
MAX_EXCEPTIONS = 64


def walk_chain(exc: BaseException) -> list[BaseException]:
    """The exceptions of ``exc``'s chain and groups, in the order Python prints them.

    Causes and contexts come before the exception they led to; group members after their group.
    Cycles are cut, and at most :data:`MAX_EXCEPTIONS` are returned: the ones nearest ``exc``
    (the earliest causes of a longer chain are left out).
    """
    out: list[BaseException] = []
    seen: set[int] = set()

    def visit(e: BaseException, depth: int) -> None:
        # `seen` counts the exceptions visited, so the walk stops going further back once it
        # has as many as it returns (causes are appended only on the way back up).
        if id(e) in seen or len(seen) >= MAX_EXCEPTIONS or depth > 100:
            return
        seen.add(id(e))
        try:
            cause = e.__cause__
            context = None if e.__suppress_context__ else e.__context__
        except BaseException:
            cause = context = None
        before = cause if isinstance(cause, BaseException) else None
        if before is None and isinstance(context, BaseException):
            before = context
        if before is not None:
            visit(before, depth + 1)
        out.append(e)
        members = getattr(e, "exceptions", None) if _is_group(e) else None
        for member in members or ():
            if isinstance(member, BaseException):
                visit(member, depth + 1)

    visit(exc, 0)
    return out


def _is_group(e: BaseException) -> bool:
    group = getattr(builtins, "BaseExceptionGroup", None)
    return group is not None and isinstance(e, group)


def class_name(cls: type) -> str:
    """``module.QualName`` of a class; builtins by their bare name."""
    module = getattr(cls, "__module__", "builtins")
    name = getattr(cls, "__qualname__", cls.__name__)
    return name if module == "builtins" else f"{module}.{name}"


def safe_text(get: Callable[[], object], fallback: str, limit: int) -> tuple[str, bool]:
    """Call ``get`` for a text, never raising; the text is cut at ``limit`` characters.

    Returns the text (``fallback`` when ``get`` raised or gave no string) and whether it was cut.
    """
    try:
        text = get()
        if not isinstance(text, str):
            return fallback, False
    except BaseException:
        return fallback, False
    if len(text) > limit:
        return text[:limit], True
    return text, False


_LIBRARY_ROOTS: tuple[str, ...] | None = None


def is_library_file(path: str) -> bool:
    """Whether ``path`` belongs to an installed library or Python itself, not the user's code."""
    global _LIBRARY_ROOTS  # noqa: PLW0603 - computed once
    if path.startswith("<"):
        return True
    if _LIBRARY_ROOTS is None:
        paths = sysconfig.get_paths()
        roots = {paths.get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
        _LIBRARY_ROOTS = tuple(
            os.path.normcase(str(Path(r).absolute())) + os.sep for r in roots if r
        )
    norm = os.path.normcase(str(Path(path).absolute()))
    parts = norm.replace("\\", "/").split("/")
    return "site-packages" in parts or "dist-packages" in parts or norm.startswith(_LIBRARY_ROOTS)


def frame_sites(tb: TracebackType | None, limit: int = 200) -> Iterator[tuple[str, int, str]]:
    """``(file, line, function)`` of each frame of a traceback, outermost first."""
    count = 0
    while tb is not None and count < limit:
        code = tb.tb_frame.f_code
        yield code.co_filename, tb.tb_lineno, code.co_name
        tb = tb.tb_next
        count += 1


def safe_getattr(obj: object, name: str, default: Any = None) -> Any:
    """Read ``obj.name`` without running anything that could hang or raise out.

    Plain attributes are read from the instance dictionary first, so no property runs for them;
    other attributes fall back to ``getattr``, whose errors become ``default``.
    """
    try:
        namespace = object.__getattribute__(obj, "__dict__")
    except Exception:
        namespace = None
    if isinstance(namespace, dict) and name in namespace:
        return namespace[name]
    try:
        return getattr(obj, name, default)
    except Exception:
        return default


class FrameView:
    """A read-only view of one live frame: where it is, and its local variables."""

    def __init__(self, frame: FrameType, lineno: int) -> None:
        self._frame: FrameType | None = frame
        self.file = frame.f_code.co_filename
        self.function = frame.f_code.co_name
        self.line = lineno

    def local(self, name: str, default: Any = None) -> Any:
        """The local variable ``name`` (``self`` included), or ``default``."""
        if self._frame is None:
            return default
        try:
            return self._frame.f_locals.get(name, default)
        except Exception:
            return default

    def locals(self) -> dict[str, Any]:
        """A copy of the frame's local variables (empty once closed, or when unreadable)."""
        if self._frame is None:
            return {}
        try:
            return dict(self._frame.f_locals)
        except Exception:
            return {}

    def close(self) -> None:
        """Drop the frame."""
        self._frame = None
