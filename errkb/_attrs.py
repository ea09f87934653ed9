"""attrs, with the methods it writes for errkb's classes kept compiled between processes.

attrs writes each class's ``__init__``, ``__eq__``, ``__hash__`` and the like as Python source
and compiles it when the class is made. For the fifty classes a first diagnosis makes, those
compiles are a seventh of its time: more than reading the records. So the compiled methods are
kept as Python keeps a module's bytecode, in the package's ``__pycache__`` (wherever
``sys.pycache_prefix`` puts it), and a later process takes them from there when attrs writes the
same source again. Only errkb's own classes are kept: any other code's pass through untouched.

Every errkb module imports attrs from here (``from errkb._attrs import attrs``), so the cache is
in place before the first class is made, whichever way errkb is entered.

The file is a ``marshal`` of ``{filename: entry}``, each entry the ``marshal`` of its
``(source, code, salt)`` (see :func:`_unsalted`), behind a header naming the Python bytecode,
the optimisation level and the format; one written by another of them, or one that cannot be
read, is passed over. A process unmarshals the entries of the classes it makes, not all of
them: a first diagnosis makes half of the hundred the file holds, and reading it costs a
fifth of what inflating and unmarshalling the whole did (3 ms). A method is taken from it only
when attrs wrote exactly the cached source: a changed class compiles as usual and replaces its
entry. The file is written as :mod:`errkb._beside` writes, at exit, and only when something
was compiled anew.
"""

from __future__ import annotations

import marshal
import sys
import threading
from types import CodeType
from typing import Any

import attrs

__all__ = ["attrs"]

# The files attrs names its generated source by: "<attrs generated methods errkb.match.Match>"
# (and "<attrs generated ... errkb...>" in other attrs releases). Only these are kept.
_OURS = " errkb."
_MAX_BYTES = 4 << 20  # a larger file is not errkb's: passed over
_FORMAT = b"errkb-methods/2"

_cache: dict[str, bytes] | None = None  # filename -> its entry, marshalled; read at the first class
_fresh: dict[str, bytes] = {}  # compiled in this process, to write at exit
_lock = threading.Lock()


def _path() -> Any:
    """Where the file is: beside this module's bytecode, as Python places it."""
    from errkb import _beside

    return _beside.path(__file__, "attrs-methods.marshal")


def _header() -> bytes:
    import importlib.util

    # A method's code depends on its source (compared entry by entry), the compiler and -O.
    return importlib.util.MAGIC_NUMBER + f"O{sys.flags.optimize} ".encode() + _FORMAT + b"\n"


def _read() -> dict[str, bytes]:
    try:
        data = _path().read_bytes()
    except (OSError, ValueError):
        return {}
    header = _header()
    if len(data) > _MAX_BYTES or not data.startswith(header):
        return {}
    try:
        # Errkb's own bytecode, trusted as its .pyc files beside it are (see the docstring).
        table = marshal.loads(memoryview(data)[len(header) :])  # noqa: S302
    except (EOFError, ValueError, TypeError):
        return {}
    return table if isinstance(table, dict) else {}


def _entry(kept: object) -> tuple[str, CodeType, int | None] | None:
    """A file's entry, unmarshalled: ``(source, code, salt)``, or ``None`` when it is not one."""
    if not isinstance(kept, bytes):
        return None
    try:
        entry = marshal.loads(kept)  # noqa: S302 - an entry of that file
    except (EOFError, ValueError, TypeError):
        return None
    if (
        isinstance(entry, tuple)
        and len(entry) == 3
        and isinstance(entry[0], str)
        and isinstance(entry[1], CodeType)
        and (entry[2] is None or isinstance(entry[2], int))
    ):
        return entry
    return None


def _write() -> None:
    """Write what this process compiled, merged with what the file holds (at exit)."""
    from errkb import _beside

    if sys.dont_write_bytecode or not _fresh:
        return
    with _lock:
        table = {**_read(), **_fresh}
        _fresh.clear()
    _beside.write(_path(), _header() + marshal.dumps(table))


def _compile(source: Any, filename: Any = "", mode: Any = "exec", *args: Any, **kwargs: Any) -> Any:
    """``compile``, as attrs calls it, taking errkb's methods from the file when it can."""
    global _cache  # noqa: PLW0603 - read once, on the first class
    if (
        args
        or kwargs
        or mode != "exec"
        or not isinstance(source, str)
        or not isinstance(filename, str)
        or _OURS not in filename
    ):
        return compile(source, filename, mode, *args, **kwargs)
    if _cache is None:
        _cache = _read()
    shape, salt = _unsalted(source)
    kept = _entry(_cache.get(filename))
    if kept is not None and kept[0] == shape:
        _, code, was = kept
        return code if was == salt else _resalted(code, was, salt)
    code = compile(source, filename, mode)
    with _lock:
        if not _fresh:
            import atexit

            atexit.register(_write)
        _fresh[filename] = _cache[filename] = marshal.dumps((shape, code, salt))
    return code


# A hashable class's __hash__ starts its tuple with a number attrs draws from the hash of the
# class's file name, which differs between processes (hash randomisation): the one part of the
# source that changes. The file keeps the source with it cut out, and the code with its number.
_HASH_OPENING = "return hash((\n"


def _unsalted(source: str) -> tuple[str, int | None]:
    """The source without the number its __hash__ starts with, and that number."""
    at = source.find(_HASH_OPENING)
    if at < 0:
        return source, None
    start = at + len(_HASH_OPENING)
    end = source.find(",", start)
    try:
        salt = int(source[start:end])
    except ValueError:
        return source, None
    return source[:start] + source[end:], salt


def _resalted(code: Any, was: int | None, salt: int | None) -> Any:
    """``code`` with the number ``was`` among its (nested) constants replaced by ``salt``."""
    consts = tuple(
        salt
        if type(c) is int and c == was
        else _resalted(c, was, salt)
        if isinstance(c, CodeType)
        else c
        for c in code.co_consts
    )
    return code.replace(co_consts=consts)


def _install() -> None:
    """Route attrs's compiles through :func:`_compile` (attrs calls the builtin by name)."""
    try:
        from attr import _make
    except ImportError:  # another attrs layout: classes compile as usual
        return
    if callable(getattr(_make, "_compile_and_eval", None)):
        _make.compile = _compile  # type: ignore[attr-defined]


_install()
