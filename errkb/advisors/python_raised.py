"""The python-raised advisor: whose code an error of the interpreter was raised in.

The records of ``records/python/`` explain errors Python raises for any code (``name 'x' is
not defined``, ``'NoneType' object has no attribute 'x'``, an unexpected keyword argument).
What such a message cannot say is whose code it came from, and that decides where to look: a
``TypeError: Accelerator.__init__() got an unexpected keyword argument`` raised in the user's
script is a call to fix or a release to install; raised inside transformers, it says that
transformers and accelerate are at releases not made for each other.

Where the traceback's frames are known (the hook, a pasted traceback), the innermost frame is
where Python raised it; this advisor names its owner, read from its path as
:func:`errkb._traceback.is_library_file` reads a live one:

- **your code**: a file outside any installed environment (or ``<stdin>``, a notebook cell);
- **an installed package**: the folder after ``site-packages`` or ``dist-packages``
  (``transformers`` of ``.../site-packages/transformers/modeling_utils.py``), with its
  installed release when the exception is live; the innermost frame of the user's code on the
  way there is named too, since that is the call the user wrote;
- **Python's standard library**: a file of ``lib/pythonX.Y/`` outside those folders, or a
  frozen module (``<frozen importlib._bootstrap>``).

Without frames (a message alone) it adds nothing.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from errkb._attrs import attrs
from errkb._patterns import compile_pattern, search
from errkb.advisors import Advice, Contract, Variant, advisor
from errkb.findings import Fact, Solution

if TYPE_CHECKING:
    from collections.abc import Sequence

    from errkb.evidence import Evidence
    from errkb.findings import ExceptionInfo, FrameInfo
    from errkb.match import Match

__all__ = ["CONTRACT", "Owner", "advise", "owner_of"]

CONTRACT = Contract(name="python-raised", variants=(Variant(name="any", requires=set()),))

#: An installed environment's package folder, and what follows it up to the next separator.
_PACKAGE = re.compile(r"[/\\](?:site|dist)-packages[/\\](?P<top>[^/\\]+)")
#: The standard library of an installed Python: ``lib/python3.11/`` (``Lib\\`` on Windows).
_STDLIB = re.compile(r"[/\\](?:lib[/\\]python\d+(?:\.\d+)?t?|Lib)[/\\]", re.IGNORECASE)


@attrs.frozen(kw_only=True)
class Owner:
    """Whose code a frame is in.

    Attributes:
        kind: ``"user"`` (the program's own code), ``"package"`` (an installed package) or
            ``"stdlib"`` (Python's standard library or a frozen module).
        package: the installed package's top-level name, for ``"package"``.
    """

    kind: str
    package: str | None = None


def owner_of(frame: FrameInfo) -> Owner:
    """Whose code ``frame`` is in, from its path (and, live, whether it is installed code)."""
    path = frame.file
    if path.startswith("<"):
        # A frozen module is Python's own; <stdin>, <string> and notebook cells are the user's.
        return Owner(kind="stdlib") if path.startswith("<frozen") else Owner(kind="user")
    found = _PACKAGE.search(path)
    if found is not None:
        top = found.group("top")
        return Owner(kind="package", package=top.removesuffix(".py").split(".", 1)[0])
    if _STDLIB.search(path) is not None or frame.library:
        return Owner(kind="stdlib")
    return Owner(kind="user")


@advisor(CONTRACT)
def advise(match: Match, evidence: Evidence) -> Advice | None:
    """The owner of the innermost frame, and the user's call that led there."""
    info = _exception_of(match, evidence)
    if info is None or not info.frames:
        return None
    raised = info.frames[-1]
    owner = owner_of(raised)
    where = _at(raised)
    if owner.kind == "user":
        return Advice(facts=(_fact("raised in", f"{where} (your code)"),), placement="after")
    if owner.kind == "stdlib":
        what = "Python's standard library"
    else:
        release = _release(owner.package, evidence)
        what = f"installed package {owner.package}" + (f" {release}" if release else "")
    facts = [_fact("raised in", f"{where} ({what})")]
    user = _user_frame(info.frames)
    if user is not None:
        facts.append(_fact("your call", _at(user)))
    solutions: tuple[Solution, ...] = ()
    if owner.kind == "package":
        solutions = (
            Solution(
                text=f"Python raised it inside {owner.package} ({where}), not in your code: "
                f"check the installed release of {owner.package} and of the libraries it "
                "calls there against the releases your code was written for "
                f"(`python -m pip show {owner.package}`), and the values your call passed.",
            ),
        )
    return Advice(solutions=solutions, facts=tuple(facts), placement="after")


def _at(frame: FrameInfo) -> str:
    return f"{frame.file}:{frame.line}, in {frame.function or '?'}"


def _fact(name: str, value: str) -> Fact:
    return Fact(name=name, value=value, source="traceback")


def _exception_of(match: Match, evidence: Evidence) -> ExceptionInfo | None:
    """The exception the match is of: the most recent whose message the record matches."""
    pattern = compile_pattern(match.record.message_pattern)
    try:
        return next(
            (i for i in reversed(evidence.infos) if search(pattern, i.message) is not None), None
        )
    except Exception:  # a pattern that times out: no frames to name
        return None


def _user_frame(frames: Sequence[FrameInfo]) -> FrameInfo | None:
    """The innermost frame of the user's code, outside the innermost frame itself."""
    return next((f for f in reversed(frames[:-1]) if owner_of(f).kind == "user"), None)


def _release(package: str | None, evidence: Evidence) -> str | None:
    """The installed release of ``package``, for a live exception (a paste's machine is not this)."""
    if package is None or evidence.text is not None:
        return None
    from errkb._dists import version

    return version(package)
