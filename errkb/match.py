"""Matching messages against records: class filter, pattern search with a timeout, ranking.

The ranking rule (also in ``docs/api.md``): every record whose pattern is found in the message
and whose ``errorClass`` admits the exception's class gets a score, the sum of

* **raise site**, 2.0: a file of the traceback ends with the record's ``filePath``;
* **class**, 1.0 when ``errorClass`` names the exception's own class, 0.5 when it names a base
  class, 0.25 when either side gives no class, 0.1 when the exception's class is only known by
  a name that cannot be resolved here (its bases are unknown, so a record for a builtin class or
  for a class of the same top-level package may still apply; others are ruled out);
* **specificity**, below 1.0: ``n / (n + 40)`` for ``n`` literal characters the pattern requires;
* **variant**, -1.0: a record marked ``variantOf`` (a vendored copy of another record's error,
  such as ChatTTS's copy of vLLM's engine) when no traceback file matches its ``filePath``, so
  the original wins unless the traceback shows the copy.

Matches come back best first; equal scores are ordered by record id, so results are stable.
"""

from __future__ import annotations

import builtins
import sys
import threading
from typing import TYPE_CHECKING, Any

import attrs
import regex

from errkb._index import LiteralIndex
from errkb._patterns import (
    DEFAULT_TIMEOUT,
    PatternTimeoutError,
    compile_pattern,
    search,
    specificity,
)
from errkb.records import RecordRef

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from errkb.records import Record

__all__ = ["ClassSpec", "Match", "Matcher", "Skipped", "typed"]

_SITE = 2.0
_VARIANT = -1.0
_EXACT, _BASE, _NO_CLASS, _UNRESOLVED = 1.0, 0.5, 0.25, 0.1


@attrs.frozen(kw_only=True)
class Match:
    """One record found in one message.

    Attributes:
        record: the record that matched.
        captures: the pattern's groups, typed (``int``/``float`` where the text is numeric);
            named groups by name, unnamed groups by position (1-based ``int`` keys).
        score: the ranking score (see the module docstring).
    """

    record: Record
    captures: Mapping[str | int, object]
    score: float


@attrs.define
class Skipped:
    """The records one or more lookups passed over, by id: what a diagnosis reports as notes.

    Attributes:
        timed_out: records whose pattern ran past its timeout on a message.
        broken: records whose pattern does not compile.
    """

    timed_out: set[str] = attrs.Factory(set)
    broken: set[str] = attrs.Factory(set)


@attrs.frozen(kw_only=True)
class ClassSpec:
    """What is known of an exception's class: its MRO as (module, qualname) pairs.

    ``resolved`` is false when only a name is known and its bases are not.
    """

    mro: tuple[tuple[str, str], ...]
    resolved: bool

    @classmethod
    def of(cls, error_class: type[BaseException] | str | None) -> ClassSpec | None:
        """From a class, a name such as ``"ValueError"`` or ``"torch.OutOfMemoryError"``, or None."""
        if error_class is None:
            return None
        if isinstance(error_class, type):
            return cls(
                mro=tuple((c.__module__, c.__qualname__) for c in error_class.__mro__),
                resolved=True,
            )
        found = _resolve(error_class)
        if found is not None:
            return cls.of(found)
        module, _, name = error_class.rpartition(".")
        return cls(mro=((module or "builtins", name),), resolved=False)

    def level(self, record_class: str | None) -> float | None:
        """The class part of the score for a record, or None when the record is ruled out."""
        if record_class is None:
            return _NO_CLASS
        for depth, (module, qualname) in enumerate(self.mro):
            if _same_class(record_class, module, qualname):
                return _EXACT if depth == 0 else _BASE
        if self.resolved:
            return None
        rec_module = record_class.rpartition(".")[0]
        own_package = self.mro[0][0].split(".")[0]
        if rec_module in ("", "builtins") or rec_module.split(".")[0] == own_package:
            return _UNRESOLVED
        return None


def _resolve(name: str) -> type[BaseException] | None:
    """A class by name, without importing anything: builtins, or an already imported module."""
    module, _, attr = name.rpartition(".")
    owner: Any = builtins if module in ("", "builtins") else sys.modules.get(module)
    found = getattr(owner, attr, None) if owner is not None else None
    return found if isinstance(found, type) and issubclass(found, BaseException) else None


def _same_class(record_class: str, module: str, qualname: str) -> bool:
    rec_module, _, rec_name = record_class.rpartition(".")
    if rec_name != qualname.rpartition(".")[2]:
        return False
    if not rec_module or module == "builtins":
        return not rec_module or rec_module == "builtins"
    # Public aliases differ in the middle (torch.cuda.OutOfMemoryError is torch.OutOfMemoryError),
    # so the top-level package decides.
    return rec_module.split(".")[0] == module.split(".", maxsplit=1)[0]


def typed(text: str | None) -> object:
    """A captured group's value: ``int`` or ``float`` when the text is a number, else the text."""
    if text is None:
        return None
    stripped = text.strip()
    try:
        return int(stripped)
    except ValueError:
        pass
    try:
        value = float(stripped)
    except ValueError:
        return text
    return value if stripped.lower() not in ("nan", "inf", "-inf", "+inf", "infinity") else text


class _Entry:
    """A record with its pattern, compiled on first use (most never are: the index skips them)."""

    __slots__ = ("_compiled", "ref")

    def __init__(self, ref: RecordRef) -> None:
        self.ref = ref
        self._compiled: regex.Pattern[str] | None = None

    @property
    def compiled(self) -> regex.Pattern[str]:
        if self._compiled is None:
            self._compiled = compile_pattern(self.ref.message_pattern)
        return self._compiled


class Matcher:
    """Matches messages against a fixed set of records; thread-safe once built.

    A literal index (:mod:`errkb._index`) picks the few records worth a regex search; the
    answer is the same as searching every record (``indexed=False`` does that, for checks and
    benchmarks). A pattern that runs past ``timeout`` on a message is skipped for that message,
    and a pattern that does not compile is skipped; both are listed in the ``skipped`` given to
    :meth:`match` (what one diagnosis reports) and in :attr:`skipped` (every lookup of this
    matcher's life, for tools).
    """

    def __init__(
        self,
        records: Iterable[Record | RecordRef],
        *,
        timeout: float = DEFAULT_TIMEOUT,
        indexed: bool = True,
    ) -> None:
        self.timeout = timeout
        self.skipped = Skipped()
        self._lock = threading.Lock()
        refs = (r if isinstance(r, RecordRef) else RecordRef.of(r) for r in records)
        self._entries = [_Entry(ref) for ref in refs if not ref.retired]
        self._index: LiteralIndex[_Entry] | None = None
        if indexed:
            self._index = LiteralIndex((e, e.ref.literal_sets(), e.ref.keys) for e in self._entries)
            for entry in self._entries:
                entry.ref.keys = None  # a cached pack's plan, now in the index

    def candidates(self, message: str) -> Sequence[_Entry]:
        """The entries worth a regex search for ``message``."""
        return self._entries if self._index is None else self._index.candidates(message)

    def match(
        self,
        message: str,
        error_class: type[BaseException] | str | None = None,
        *,
        files: Iterable[str] = (),
        skipped: Skipped | None = None,
    ) -> list[Match]:
        """Every record found in ``message``, best first (see the module docstring).

        Records passed over (a pattern that timed out or does not compile) are added to
        ``skipped`` when given, and always to :attr:`skipped`.
        """
        spec = ClassSpec.of(error_class)
        paths = tuple("/" + f.replace("\\", "/").lstrip("/") for f in files)
        found: list[Match] = []
        for entry in self.candidates(message):
            record = entry.ref
            level = _NO_CLASS if spec is None else spec.level(record.error_class)
            if level is None:
                continue
            try:
                hit = search(entry.compiled, message, self.timeout)
            except PatternTimeoutError:
                self._skip("timed_out", record.id, skipped)
                continue
            except (regex.error, RecursionError, OverflowError, MemoryError):
                self._skip("broken", record.id, skipped)
                continue
            if hit is None:
                continue
            site = record.file_path and any(
                p.endswith("/" + record.file_path.lstrip("/")) for p in paths
            )
            bonus = _SITE if site else (_VARIANT if record.variant_of else 0.0)
            n = specificity(record.message_pattern)
            score = round(bonus + level + n / (n + 40), 4)
            found.append(Match(record=record.load(), captures=_captures(hit), score=score))
        found.sort(key=lambda m: (-m.score, m.record.id))
        return found

    def _skip(self, kind: str, record_id: str, skipped: Skipped | None) -> None:
        with self._lock:
            getattr(self.skipped, kind).add(record_id)
            if skipped is not None:
                getattr(skipped, kind).add(record_id)


def _captures(hit: regex.Match[str]) -> dict[str | int, object]:
    named = hit.re.groupindex
    out: dict[str | int, object] = {name: typed(hit.group(name)) for name in named}
    positions = set(named.values())
    for index in range(1, (hit.re.groups or 0) + 1):
        if index not in positions:
            out[index] = typed(hit.group(index))
    return out
