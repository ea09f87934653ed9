"""Matching messages against records: class filter, pattern search with a timeout, ranking.

The ranking is one total order (also in ``docs/api.md``), made by :func:`ranked`. Every record
whose pattern is found in the message and whose ``errorClass`` admits the exception's class is a
match; so is a record whose ``sitePatterns`` name the raise site (the innermost frame's file and
function) of an exception its message does not match, as weaker evidence. Matches are ordered
by, in turn:

0. **evidence**: a match of the message above a match of the raise site alone (a bare
   ``AssertionError`` from ChatTTS's model check, a ``KeyError`` from a vLLM weight loader);
1. **tier**: hand-written records above records mined from source (tag ``mined``); except that
   a mined record joins the hand-written tier when a hand-written record of its library matched
   too and the frames show the mined record's raise site better (part 3 below) than that of
   any hand-written record of the library: the same words raised at another place of one
   library (peft's "Target modules ... not found" from ``inject_adapter`` and from
   ``_set_trainable``), told apart by the frames. Below both, records of a **fallback** family
   (tag ``fallback``): Python's own import errors that name only a library (``No module named
   'vllm'``), which any record naming the module, name or change itself outranks, and a
   library's catch-all record for messages it words alike whatever the cause (torch's ``CUDA
   error: <the CUDA runtime's text>``), which a record naming the cause outranks; no mined
   match folds into one, and one matches only under a class errkb can place (not
   **unresolved** below: a library's ``CompilationError`` quoting an ``AttributeError`` is
   that library's error, not Python's). Lowest of all, the **interpreter** records (tag
   ``interpreter``, library ``python``, also tagged ``fallback``): errors Python raises for any
   code (``name 'x' is not defined``, ``'NoneType' object has no attribute 'x'``, ``[Errno 2]
   No such file or directory``), which name no library at all; they answer only when no
   library's record does, by its message or by its raise site (a match of the raise site alone
   ranks above them);
2. **class**: how the exception's class relates to the record's ``errorClass`` (and the other
   acceptable classes it lists in ``errorClasses``):

   - **exact**: the same class, by its qualified name, or by its short name when only that is
     known (IPython and Jupyter print ``OutOfMemoryError: ...``);
   - **alias**: the same class under another module name: a known rename or re-export
     (:data:`MODULE_ALIASES`), or another module of the same top-level package;
   - **base**: ``errorClass`` is a base class of the exception's, or the exception's class is
     one the record declares acceptable in ``errorClasses``;
   - **none**: either side gives no class;
   - **unresolved**: the class is known only by a name errkb cannot resolve here (not a
     builtin, not in an imported module): such a name never hides a record whose message
     matches; ranked higher when the record's class is a builtin or of the same top-level
     package (**unresolved, likely**) than otherwise (**unresolved**);
   - a class errkb knows (a live exception, a builtin, a class of an imported module) that is
     none of these rules the record out;
3. **raise site**: the innermost frame, where the exception was raised, is in the record's
   ``filePath`` or a file its ``versions.sites`` name (where other releases raised it); else
   another frame of the traceback is; else the
   traceback passes through the package that file is in (the first folder of ``filePath``:
   ``torch/``, ``ChatTTS/``), as when a message is raised from several files of a package and
   the record names one (a ``skew`` record's file is the module its ``name`` is in); below no
   evidence either way, a record marked ``variantOf`` (a
   vendored copy of another record's error) when the traceback shows neither its file nor its
   package, so the original wins unless the traceback shows the copy;
4. **form**: the whole message; then the message cut short inside a match, after the pattern's
   head (its first sentence, or its first 30 literal characters; see
   :func:`errkb._patterns.head_pattern`: a log line, an issue title, a first-line paste); then,
   for mined records only, a **literal run**: the pattern does not match but the message holds
   its longest literal run whole (at least :data:`LITERAL_RUN` characters), as a reworded or
   mangled paste may;
5. **specificity**: more literal characters required by the part that matched first;
6. **what users hit**: a record that says what to do (solutions, an example fix or an advisor)
   above one that does not: with no frames to tell two raise sites of one message apart, the
   one written up is the one users meet;
7. **still raised**: a record whose ``versions`` have no ``last`` release (or that states no
   releases) above one that the newest releases no longer raise;
8. the order the registry holds the records in (its sources in the order given, a folder's
   files by name, a pack's records by line), so that results are stable. Never the record id:
   an id says nothing of which record is likelier.

A mined record whose message Python words itself (every ``skew`` record, and any mined record
whose pattern says ``got an unexpected keyword argument``, ``missing N required positional
argument``, ``has no attribute``, ``cannot import name`` or ``No module named``) names a
library's class, function or module in words any user's code shares. It matches only when the
message names what it names (the class of ``Cls.method()`` or ``'Cls' object``, read from
``skew.classes`` when the record has them, else from its pattern; a module's function for a bare
``func()``, so never a method printed bare as Python 3.9 does; the module of an import), or when
a traceback frame is in the library's package; it has no literal-run form; and its text names
the message's class where it named another of the classes it covers (or a capture, ``{cls}``).
A hand-written record with ``skew`` is held to the same test, its pattern standing for the
classes it covers: a qualifier its match leaves out (``MyThing.`` before ``__init__()``) is not.

A match's ``score`` encodes 2 to 5 as one number, so that a higher score is a better match
within a tier: class 100 (exact), 80 (alias), 60 (base), 40 (none), 20 (unresolved, likely) or
0 (unresolved); raise site +9 (raised in its file), +6 (its file in the traceback) or +3 (its
package), variant without any -3; form
0, -1 (cut) or -2 (literal run); specificity ``n / (n + 40)`` for ``n`` literal characters,
below 1. A match of the raise site alone scores its class, +9, and no form or specificity.
"""

from __future__ import annotations

import builtins
import itertools
import re
import sys
import threading
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeVar

from errkb._attrs import attrs
from errkb._index import (
    LiteralIndex,
    Needs,
    beyond_head,
    holds,
    literal_test,
    message_keys,
    words_of,
)
from errkb._lazy_regex import lazy_re, regex_errors
from errkb._patterns import (
    DEFAULT_TIMEOUT,
    CutChain,
    PatternTimeoutError,
    compile_pattern,
    cut_chain,
    cut_pattern,
    fill_template,
    head_regex,
    literal_sets,
    may_end_inside,
    pattern_facts,
    required_literals,
    search,
    search_prefix,
    template_names,
)
from errkb.records import SITE_TAG, RecordRef

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Sequence

    import regex

    from errkb._scanplan import NeedlePlan
    from errkb.records import Listed, Record

__all__ = [
    "FALLBACK_TAG",
    "INTERPRETER_TAG",
    "LITERAL_RUN",
    "MINED_TAG",
    "ClassSpec",
    "LazyRefs",
    "Match",
    "Matcher",
    "Skipped",
    "ranked",
    "typed",
]

# The score's parts (see the module docstring): each level of one part outweighs every
# combination of the parts after it.
_EXACT, _ALIAS, _BASE, _NO_CLASS, _UNRESOLVED, _UNKNOWN = 100.0, 80.0, 60.0, 40.0, 20.0, 0.0
_RAISED, _SITE, _PACKAGE, _VARIANT = 9.0, 6.0, 3.0, -3.0
_CUT, _RUN = -1.0, -2.0
_NO_CLASSES: frozenset[str] = frozenset()
#: The tag of records mined from source: they rank below every hand-written record.
MINED_TAG = "mined"
#: The tag of a family's records that name only a library: they rank below every other record.
FALLBACK_TAG = "fallback"
#: The tag of records of errors the interpreter raises for any code (``records/python/``): they
#: rank below every other record, fallbacks and matches of a raise site included.
INTERPRETER_TAG = "interpreter"
#: The shortest literal run that identifies a mined record's message on its own.
LITERAL_RUN = 32


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
    #: Where else the same error is raised: mined records folded into this hand-written one,
    #: as ``"path:line (versions)"`` lines.
    also: tuple[str, ...] = ()
    #: The raise-site part of the score: 9 (raised in a file the record names), 6 (such a file
    #: is in the traceback), 3 (its package is), 0, or -3 (a variant with none of these).
    site: float = 0.0
    #: Whether the record matched on the raise site alone (its ``sitePatterns``), not the
    #: message: weaker evidence, ranked below every match of the message.
    by_site: bool = False

    @property
    def mined(self) -> bool:
        """Whether the record was mined from source (it ranks below every hand-written one)."""
        return MINED_TAG in self.record.tags

    @property
    def fallback(self) -> bool:
        """Whether the record is a fallback, naming only a library (it ranks below every other)."""
        return FALLBACK_TAG in self.record.tags

    @property
    def interpreter(self) -> bool:
        """Whether the record is of an error Python raises for any code (it ranks lowest of all)."""
        return INTERPRETER_TAG in self.record.tags


@attrs.define
class Skipped:
    """The records one or more lookups passed over, by id: what a diagnosis reports as notes.

    Attributes:
        timed_out: records whose pattern ran past its timeout on a message.
        broken: records whose pattern does not compile.
    """

    timed_out: set[str] = attrs.Factory(set)
    broken: set[str] = attrs.Factory(set)


#: Modules known by two names, as a traceback may print them -> as records name them: renames
#: and re-exports. ``torch.cuda.OutOfMemoryError`` is ``torch.OutOfMemoryError`` (2.5 made it
#: top level); safetensors <= 0.7 raised ``SafetensorError`` from a module ``safetensors_rust``;
#: ``pickle``'s errors are ``_pickle``'s.
MODULE_ALIASES: dict[str, str] = {
    "torch.cuda": "torch",
    "safetensors_rust": "safetensors._safetensors_rust",
    "pickle": "_pickle",
}


@attrs.frozen(kw_only=True)
class ClassSpec:
    """What is known of an exception's class: its MRO as (module, qualname) pairs.

    ``resolved`` is false when only a name is known and its bases are not; the module of a
    bare name such as ``"OutOfMemoryError"`` (as IPython and Jupyter print classes) is ``""``.
    """

    mro: tuple[tuple[str, str], ...]
    resolved: bool
    # Each record's class part, by its errorClass and errorClasses: read once per spec.
    _levels: dict[tuple[str | None, Sequence[str]], float | None] = attrs.field(
        factory=dict, init=False, eq=False, repr=False
    )

    @classmethod
    def of(cls, error_class: type[BaseException] | str | None) -> ClassSpec | None:
        """From a class, a name such as ``"ValueError"`` or ``"torch.OutOfMemoryError"``, or None.

        A name is resolved without importing anything: a builtin, or a class of a module that
        is already imported. Other names stay names (never imported: the text is untrusted).
        The spec of a builtin class is made once (with the levels read of it, see
        :meth:`level`): a scan asks for ``ValueError``'s at every line that names it.
        """
        if error_class is None:
            return None
        kept = _BUILTIN_SPECS.get(error_class)
        if kept is not None:
            return kept
        if isinstance(error_class, type):
            spec = cls(
                mro=tuple((c.__module__, c.__qualname__) for c in error_class.__mro__),
                resolved=True,
            )
            if error_class.__module__ == "builtins" and len(_BUILTIN_SPECS) < _BUILTIN_KEPT:
                _BUILTIN_SPECS[error_class] = _BUILTIN_SPECS[error_class.__qualname__] = spec
            return spec
        found = _resolve(error_class)
        if found is not None:
            return cls.of(found)
        module, _, name = error_class.rpartition(".")
        return cls(mro=((module, name),), resolved=False)

    def level(self, record_class: str | None, also: Sequence[str] = ()) -> float | None:
        """The class part of the score for a record, or None when the record is ruled out.

        ``record_class`` is the record's ``errorClass``, ``also`` its ``errorClasses``. See the
        module docstring for the rule: exact > alias > base or declared > unresolved.
        """
        key = (record_class, tuple(also))
        levels = self._levels
        if key in levels:
            return levels[key]
        found = levels[key] = self._level(record_class, also)
        return found

    def _level(self, record_class: str | None, also: Sequence[str]) -> float | None:
        if record_class is None and not also:
            return _NO_CLASS
        best: float | None = None
        candidates = [
            (c, i == 0 and record_class is not None)
            for i, c in enumerate((record_class, *also) if record_class is not None else also)
        ]
        for name, primary in candidates:
            for depth, (module, qualname) in enumerate(self.mro):
                relation = _relation(name, module, qualname)
                if relation is None:
                    continue
                if primary and depth == 0:
                    found = _EXACT if relation == "exact" else _ALIAS
                else:
                    found = _BASE
                best = found if best is None else max(best, found)
        if best is not None or self.resolved:
            return best
        # A name errkb cannot resolve never hides a record whose message matches; its bases are
        # unknown, so a record of a builtin class or of the same package is likelier.
        own_package = self.mro[0][0].split(".")[0]
        rec_module = (record_class or also[0]).rpartition(".")[0]
        if rec_module in ("", "builtins") or rec_module.split(".")[0] == own_package:
            return _UNRESOLVED
        return _UNKNOWN


#: The specs of builtin exception classes, by class and by name (see ClassSpec.of).
_BUILTIN_SPECS: dict[type[BaseException] | str, ClassSpec] = {}
_BUILTIN_KEPT = 256


def _resolve(name: str) -> type[BaseException] | None:
    """A class by name, without importing anything: builtins, or an already imported module."""
    module, _, attr = name.rpartition(".")
    owner: Any = builtins if module in ("", "builtins") else sys.modules.get(module)
    found = getattr(owner, attr, None) if owner is not None else None
    return found if isinstance(found, type) and issubclass(found, BaseException) else None


def _canonical(module: str) -> str:
    """A module name with a known alias replaced (the longest aliased prefix wins)."""
    parts = module.split(".")
    for cut in range(len(parts), 0, -1):
        head = ".".join(parts[:cut])
        if head in MODULE_ALIASES:
            return ".".join([MODULE_ALIASES[head], *parts[cut:]])
    return module


def _relation(record_class: str, module: str, qualname: str) -> str | None:
    """How a record's class relates to a class of the exception: "exact", "alias" or None."""
    rec_module, _, rec_name = record_class.rpartition(".")
    if rec_name != qualname.rpartition(".")[2]:
        return None
    rec_module = "" if rec_module == "builtins" else rec_module
    if module == "":  # a bare name, as IPython prints it: the short names agree
        return "exact"
    module = "" if module == "builtins" else module
    if not rec_module or not module:
        return "exact" if rec_module == module else None
    if rec_module == module:
        return "exact"
    if _canonical(rec_module) == _canonical(module):
        return "alias"
    # Public re-exports differ in the middle (transformers.utils.X is transformers.X), so
    # within one top-level package the short name decides.
    if rec_module.split(".")[0] == module.split(".")[0]:
        return "alias"
    return None


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

    __slots__ = (
        "_chain",
        "_compiled",
        "_covers",
        "_cut",
        "_head",
        "_place",
        "_rest",
        "facts",
        "ref",
    )

    def __init__(self, ref: RecordRef) -> None:
        self.ref = ref
        self._compiled: regex.Pattern[str] | None = None
        self._head: regex.Pattern[str] | bool | None = False  # False: not looked at yet
        self._cut: regex.Pattern[str] | None = None
        self._chain: CutChain | bool | None = False  # False: not looked at yet
        self._rest: Needs | None = None
        self._covers: _Covers | None = None
        # What every lookup that meets the record reads of it (see read_facts), once read.
        self.facts: tuple[bool, bool, float, float, bool, bool] | None = None
        self._place: str | None = None

    def read_facts(self) -> tuple[bool, bool, float, float, bool, bool]:
        """What every lookup that meets the record reads of it, read from the ref once.

        Mined, fallback, the specificity part of a whole and of a cut match's score; then, for
        a mined record, whether it is mined from a check macro's own skeleton
        (:func:`_skeleton`) and from a message Python words itself (:func:`_worded`). Kept as
        :attr:`facts`, which a lookup reads without a call.
        """
        ref = self.ref
        _, whole, cut = pattern_facts(ref.message_pattern)
        mined = MINED_TAG in ref.tags
        self.facts = (
            mined,
            FALLBACK_TAG in ref.tags,
            whole / (whole + 40),
            cut / (cut + 40),
            mined and _skeleton(ref),
            mined and _worded(ref),
        )
        return self.facts

    def place(self, record: Record) -> str:
        """:func:`_place` of the entry's record (``record``, its whole), made once."""
        if self._place is None:
            self._place = _place(record)
        return self._place

    def covers(self, record: Record, *, written: bool) -> _Covers:
        """What the record names, read once from its pattern and ``skew`` (``record`` is its own)."""
        if self._covers is None:
            self._covers = _Covers.of(record, self.ref.library, written=written)
        return self._covers

    def whole_may_match(self, message: str) -> bool:
        """Whether ``message`` holds what a whole match needs beyond what the index tested.

        False means a search of the whole pattern cannot find it (see :func:`errkb._index.beyond_head`).
        """
        if self._rest is None:
            self._rest = beyond_head(
                literal_sets(self.ref.message_pattern), self.ref.literal_sets()
            )
        return holds(self._rest, message)

    @property
    def compiled(self) -> regex.Pattern[str]:
        if self._compiled is None:
            self._compiled = compile_pattern(self.ref.message_pattern)
        return self._compiled

    @property
    def head(self) -> regex.Pattern[str] | None:
        """The compiled head of the pattern (see :func:`errkb._patterns.head_regex`), if any."""
        if self._head is False:
            text = head_regex(self.ref.message_pattern)
            self._head = compile_pattern(text) if text is not None else None
        return self._head  # type: ignore[return-value]

    def may_end_inside(self, message: str) -> bool:
        """Whether ``message`` may end inside a cut match (:func:`errkb._patterns.may_end_inside`).

        True for a pattern of another form than the walk reads: its regex tells.
        """
        if self._chain is False:
            self._chain = cut_chain(self.ref.message_pattern)
        return self._chain is None or may_end_inside(self._chain, message)  # type: ignore[arg-type]

    @property
    def cut(self) -> regex.Pattern[str]:
        """The pattern compiled for a message cut short (:func:`errkb._patterns.cut_pattern`)."""
        if self._cut is None:
            text = cut_pattern(self.ref.message_pattern)
            self._cut = self.compiled if text == self.ref.message_pattern else compile_pattern(text)
        return self._cut


class LazyRefs(Protocol):
    """Records whose refs are made on demand: a pack loaded from its shipped index."""

    def __len__(self) -> int: ...

    def candidates(
        self, message: str, words: Iterable[str], contains: Callable[[str], bool]
    ) -> list[RecordRef]:
        """The refs of the records that may match ``message`` (see :mod:`errkb._index`).

        ``words`` are its words (:func:`errkb._index.words_of`, each once), and ``contains``
        its :func:`errkb._index.literal_test`, made once for every pack.
        """
        ...

    def refs(self) -> list[RecordRef]:
        """Every ref."""
        ...

    def listed(self, *, mined: bool = True) -> list[Listed]:
        """What a listing shows of every record (``mined=False``: of those not mined)."""
        ...

    def written_refs(self) -> list[RecordRef]:
        """The refs of the records not tagged mined."""
        ...

    def written_count(self) -> int:
        """How many records are not tagged mined (none is read)."""
        ...

    def sited_refs(self) -> list[RecordRef]:
        """The refs of the hand-written records with ``sitePatterns`` (no other is read)."""
        ...

    def find(self, key: str) -> RecordRef | None:
        """The ref of the record with this id, else of the first with this slug."""
        ...

    def ref_at(self, row: int) -> RecordRef:
        """The ref of the record on ``row``."""
        ...

    def needle_plan(self) -> NeedlePlan | None:
        """What a scan looks for in these records, when the index keeps it."""
        ...


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
        lazy: Sequence[LazyRefs] = (),
    ) -> None:
        self.timeout = timeout
        self.skipped = Skipped()
        self._lock = threading.Lock()
        refs: Iterable[RecordRef] = (
            r if isinstance(r, RecordRef) else RecordRef.of(r) for r in records
        )
        if not indexed:  # every record is searched: the lazy ones too
            refs = itertools.chain(refs, (r for pack in lazy for r in pack.refs()))
            lazy = ()
        self._entries = [_Entry(ref) for ref in refs if not ref.retired]
        self._lazy = tuple(lazy)
        self._lazy_entries: dict[int, _Entry] = {}
        self._sited: list[_Entry] | None = None
        self._index: LiteralIndex[_Entry] | None = None
        if indexed:
            self._index = LiteralIndex(
                (
                    e,
                    e.ref.literal_sets(),
                    e.ref.keys,
                    e.ref.key_sets() if e.ref.keys is None else None,
                )
                for e in self._entries
            )
            for entry in self._entries:
                entry.ref.keys = None  # a cached pack's plan, now in the index

    def candidates(self, message: str) -> Sequence[_Entry]:
        """The entries worth a regex search for ``message``."""
        if self._index is None:  # every record is searched: the lazy ones were made eager
            return self._entries
        words = set(words_of(message))
        # The shipped records are all lazy: no eager entry to look at.
        found = (
            self._index.candidates(message, message_keys(message, words)) if self._entries else []
        )
        if not self._lazy:
            return found
        more = []
        contains = literal_test(message)
        for pack in self._lazy:
            for ref in pack.candidates(message, words, contains):
                entry = self._lazy_entries.get(id(ref))
                if entry is None:  # the pack makes each ref once, so its id stays its own
                    entry = self._lazy_entries.setdefault(id(ref), _Entry(ref))
                if not ref.retired:
                    more.append(entry)
        return [*found, *more]

    def match(
        self,
        message: str,
        error_class: type[BaseException] | str | None = None,
        *,
        files: Iterable[str] = (),
        raised_at: tuple[str, str] | None = None,
        skipped: Skipped | None = None,
    ) -> list[Match]:
        """Every record found in ``message``, best first (see the module docstring).

        ``files`` are the traceback's files; ``raised_at`` the file and function of its
        innermost frame, where the exception was raised, for records with ``sitePatterns``.
        Records passed over (a pattern that timed out or does not compile) are added to
        ``skipped`` when given, and always to :attr:`skipped`.
        """
        spec = ClassSpec.of(error_class)
        paths = tuple("/" + f.replace("\\", "/").lstrip("/") for f in files) if files else ()
        # A mined match waits until every candidate is read: one that folds into a hand-written
        # match (see _fold) is only a place in that match's text, so its captures, its text and
        # its Match are made only if it does not fold.
        found: list[_Written | _Held] = []
        searched: dict[str, tuple[regex.Match[str] | None, float]] = {}  # see _search
        # Each library a hand-written record matched, with its best raise-site part (see
        # _best_sites), as they are found.
        best: dict[str, float] = {}
        framed = bool(paths) or raised_at is not None
        for entry in self.candidates(message):
            record = entry.ref
            level = (
                _NO_CLASS if spec is None else spec.level(record.error_class, record.error_classes)
            )
            facts = entry.facts or entry.read_facts()
            mined, fallback, whole_part, cut_part, skeleton, worded = facts
            if level is None or (level <= _UNRESOLVED and fallback):
                continue  # a fallback is Python's own words under Python's own classes
            if skeleton and not _through(record.library, paths):
                continue  # any library's copy of the macro words it so: its frames must vouch
            result = self._search(entry, message, searched, skipped)
            if result is None:
                continue
            hit, form = result
            if hit is None and mined and not framed and record.library in best:
                # Its literal run alone, with no frame to place it: its site part is below
                # _SITE, so it cannot join the tier (_joins) and _fold would drop it.
                continue
            run = (
                _literal_run(record.message_pattern)
                if hit is None and mined and not worded
                else None
            )
            if hit is None and not _holds_run(message, run):
                continue
            whole = record.load()
            # Unframed, _site()'s first case, read here: every candidate would pay the call.
            bonus = (
                _site(whole, paths, raised_at) if framed else _VARIANT if whole.variant_of else 0.0
            )
            classes, shown = _NO_CLASSES, ""
            if worded or whole.skew is not None:  # Python's own words: they must name its own
                covers = entry.covers(whole, written=not mined)
                named = None if hit is None else _claim(covers, message, hit, paths)
                if named is None:
                    continue
                if worded:  # mined: its module is its raise site, its text is generated
                    bonus = max(bonus, covers.site(paths))
                    classes, shown = covers.classes, named
            if hit is None:
                form, n = _RUN, len(run or "")
                part = n / (n + 40)
            else:
                part = cut_part if form else whole_part
            score = round(level + bonus + form + part, 4)
            if mined:
                held = (whole, whole.library, hit, score, bonus, worded, classes, shown, entry)
                found.append(_new(_Held, held))
            else:
                captures = _NO_CAPTURES if hit is None else _Captures(hit)
                found.append(_new(_Written, (whole, captures, score, bonus, False)))
                if not fallback:
                    best[whole.library] = max(bonus, best.get(whole.library, bonus))
        if not found and raised_at is None:  # most messages: nothing to rank or fold
            return []
        return _fold(found, self._by_site(raised_at, spec, found), best)

    def _search(
        self,
        entry: _Entry,
        message: str,
        searched: dict[str, tuple[regex.Match[str] | None, float]],
        skipped: Skipped | None = None,
    ) -> tuple[regex.Match[str] | None, float] | None:
        """The entry's match in ``message`` and its form: whole (0), cut short (-1), or none.

        None when the pattern ran past the timeout or is broken: it is passed over, and listed
        in ``skipped`` (see :meth:`_skip`). A whole search is made only when the message holds
        the literals it needs (see :func:`errkb._index.beyond_head`), except by the naive
        matcher (``indexed=False``), the reference, which searches every pattern whole.
        ``searched`` keeps the results of one message by pattern: records of one message in
        several packs (vLLM's, ChatTTS's copy) share a pattern, searched once.
        """
        pattern = entry.ref.message_pattern
        if pattern in searched:
            return searched[pattern]
        try:
            hit = (
                search(entry.compiled, message, self.timeout)
                if self._index is None or entry.whole_may_match(message)
                else None
            )
            form = 0.0
            if hit is None and entry.may_end_inside(message) and entry.head is not None:
                hit = search_prefix(entry.cut, entry.head, message, self.timeout)
                form = _CUT if hit is not None else 0.0
        except PatternTimeoutError:
            self._skip("timed_out", entry.ref.id, skipped)
            return None
        except regex_errors(RecursionError, OverflowError, MemoryError):
            self._skip("broken", entry.ref.id, skipped)
            return None
        searched[pattern] = (hit, form)
        return hit, form

    def _by_site(
        self,
        raised_at: tuple[str, str] | None,
        spec: ClassSpec | None,
        matched: Sequence[_Written | _Held],
    ) -> list[Match]:
        """The records whose ``sitePatterns`` name the raise site, and not matched already."""
        if raised_at is None:
            return []
        path, function = raised_at
        seen = {m.record.id for m in matched}
        found = []
        for entry in self._site_entries():
            record = entry.ref
            whole = record.load()
            if record.id in seen or not any(s.matches(path, function) for s in whole.site_patterns):
                continue
            level = (
                _NO_CLASS if spec is None else spec.level(record.error_class, record.error_classes)
            )
            if level is not None:
                score = round(level + _RAISED, 4)
                found.append(
                    Match(record=whole, captures={}, score=score, site=_RAISED, by_site=True)
                )
        return found

    def _site_entries(self) -> list[_Entry]:
        """The hand-written records with ``sitePatterns``, read once: those the loader tagged.

        Mined records never have them: a miner reads a message where it is raised, not a site.
        A pack's index lists its rows so tagged: no other record of it is read.
        """
        if self._sited is None:
            refs = [e.ref for e in self._entries if _sited(e.ref)]
            refs += [r for pack in self._lazy for r in pack.sited_refs()]
            self._sited = [_Entry(r) for r in refs]
        return self._sited

    def _skip(self, kind: str, record_id: str, skipped: Skipped | None) -> None:
        with self._lock:
            getattr(self.skipped, kind).add(record_id)
            if skipped is not None:
                getattr(skipped, kind).add(record_id)


def _sited(ref: RecordRef) -> bool:
    """Whether a hand-written record names raise sites (``sitePatterns``) to be matched by."""
    return SITE_TAG in ref.tags and MINED_TAG not in ref.tags and not ref.retired


def _site(
    record: Record, paths: tuple[str, ...], raised_at: tuple[str, str] | None = None
) -> float:
    """The raise-site part of the score (the module docstring's part 3).

    ``raised_at`` is the innermost frame's file and function, where the exception was raised;
    ``paths`` the traceback's files. The record's files are its ``filePath`` and those its ``versions.sites`` name: the same
    message raised elsewhere by older releases (vLLM's V0 engine in ``llm_engine.py``, then
    ``worker.py``) is still the record's own raise site.
    """
    if not paths and raised_at is None:  # a message alone: no frame to find a file in
        return _VARIANT if record.variant_of else 0.0
    where = _installed(record.file_path or "")
    files = {where, *_site_files(record)} - {""}
    raised = "/" + raised_at[0].replace("\\", "/").lstrip("/") if raised_at else None
    if raised is not None and any(raised.endswith("/" + f) for f in files):
        return _RAISED
    if any(p.endswith("/" + f) for p in paths for f in files):
        return _SITE
    package = where.partition("/")[0] if "/" in where else ""
    if package and any(f"/{package}/" in p for p in paths):
        return _PACKAGE
    return _VARIANT if record.variant_of else 0.0


def _site_files(record: Record) -> list[str]:
    """The files a record's ``versions.sites`` name (``":line"`` is the file listed before)."""
    if record.versions is None:
        return []
    files = []
    for _, where in record.versions.sites:
        path = where.rpartition(":")[0]
        if path:
            files.append(_installed(path))
    return files


def _installed(path: str) -> str:
    """A repository path as it ends an installed file's path: no ``src/`` or ``.../py_src/`` root.

    transformers, huggingface_hub and accelerate keep their package under ``src/`` in the
    repository, safetensors and tokenizers under ``bindings/python/py_src/``; a traceback shows
    ``site-packages/transformers/...``.
    """
    path = path.lstrip("/")
    _, sep, package = path.rpartition("py_src/")
    return package if sep else path.removeprefix("src/")


def ranked(found: Iterable[Match]) -> list[Match]:
    """Matches best first, in the one order of the module docstring.

    Matches of one message and of the notes printed with it are ranked together by
    :func:`errkb.diagnose` and ``errkb scan``, so the order is this function's, not a key.
    """
    found = list(found)
    return _ranked(found, _best_sites(found))


#: What is ranked: matches, and hand-written ones not made yet.
_Ranked = TypeVar("_Ranked", bound="Match | _Written")


def _ranked(found: list[_Ranked], best: Mapping[str, float]) -> list[_Ranked]:
    """:func:`ranked`, given the matches' :func:`_best_sites`."""
    if len(found) < 2:  # nothing to order
        return found

    def key(m: _Ranked) -> tuple[bool, bool, bool, bool, float, bool, bool]:
        tags = m.record.tags  # read once: the tiers are tags (Match.mined and the others)
        return (
            INTERPRETER_TAG in tags,
            m.by_site,
            FALLBACK_TAG in tags,
            MINED_TAG in tags and not _joins(m.site, m.record.library, best),
            -m.score,
            *_lesser(m.record),
        )

    return sorted(found, key=key)


def _lesser(record: Record) -> tuple[bool, bool]:
    """The ranking's parts 6 and 7, false first: says nothing to do, no longer raised."""
    useful = bool(record.solutions or record.example_fix or record.advisors)
    current = record.versions is None or record.versions.last is None
    return (not useful, not current)


def _best_sites(found: Iterable[Match | _Written]) -> dict[str, float]:
    """For each library with a hand-written match of the message, its best raise-site part.

    A fallback match is no such match: a mined record naming the module or name itself is a
    finding of its own, ranked above it.
    """
    best: dict[str, float] = {}
    for m in found:
        tags = m.record.tags
        if not m.by_site and MINED_TAG not in tags and FALLBACK_TAG not in tags:
            library = m.record.library
            best[library] = max(m.site, best.get(library, m.site))
    return best


def _joins(site: float, library: str, best: Mapping[str, float]) -> bool:
    """Whether a mined match with this raise-site part joins the hand-written tier.

    It does when its raise-site file is in the traceback, a hand-written record of its library
    matched the message too, and the frames show no hand-written record of that library as
    well: its site part is higher than all of theirs.
    """
    return site >= _SITE and site > best.get(library, site)


#: Messages Python itself words (a record mined from one names the library's class, function
#: or module, but the same words come from any user's code), searched in a record's pattern.
_PYTHON_WORDINGS = lazy_re(
    r"got an unexpected keyword argument|missing \S+ required (?:positional|keyword-only) "
    r"argument|has no attribute|cannot import name|No module named"
)
# The tag of records of version skew: all are worded as Python words its errors.
_SKEW_TAG = "skew"

# What a message in Python's words names, searched in the text of a match: the callee of a
# call, the class or module that lacks an attribute, the module of an import.
_SUBJECT = lazy_re(
    r"(?P<call>(?<![\w.<>])[A-Za-z_<][\w.<>]*)\(\)"
    r"|(?:type object )?'(?P<object>[^'\s]+)'(?: object)? has no attribute"
    r"|module '(?P<module>[^'\s]+)' has no attribute"
    # transformers' lazy module words it without quotes: "module transformers has no attribute X"
    r"|module (?P<lazy>[A-Za-z_][\w.]*) has no attribute"
    r"|cannot import name '(?P<name>[^'\s]+)'(?: from (?:partially initialized module )?"
    r"'(?P<source>[^'\s]+)')?"
    r"|No module named '(?P<missing>[^'\s]+)'"
)
# What a pattern names: identifiers alternated in a group (``(?:A|B)``, ``(?:A\.)?``), quoted
# (``'A'``, ``'pkg\.mod'``), or written before a dot (``A\.forward``).
_NAMED = lazy_re(
    r"\((?:\?:|\?P<\w+>)((?:[A-Za-z_]\w*\|)*[A-Za-z_]\w*)(?:\\\.)?\)"
    r"|'([A-Za-z_](?:\w|\\\.)*)'"
    r"|([A-Za-z_]\w*)\\\."
)
# A pattern that names a class before its call (``(?:Cls\.)?forward\(\)``): a method's.
_METHOD_CALL = lazy_re(r"\\\.\)?\??[A-Za-z_]\w*\\\(\\\)")
# In a record's text, a class or a list of classes in backticks ("`A`, `B` and 57 more"), and
# a class before a member (`Cls.forward()`).
_CLASS_LIST = lazy_re(
    r"`[A-Za-z_]\w*`(?:(?:, |,? and )`[A-Za-z_]\w*`)*(?:,? and \d+ more)?( no longer have\b)?"
)
_CLASS_DOT = lazy_re(r"(?<=`)([A-Za-z_]\w*)(?=\.\w)")
_INHERITORS = lazy_re(r" \(and the [\d,]+ classes? that inherits? it\)")
# The miner's words about a list of classes, and how they read for the one in the message.
_PLURAL = (
    (": they stopped inheriting it", ": it stopped inheriting it"),
    ("where these classes lack", "where `{}` lacks"),
)
# How far before a match a qualified name may start (``MyModel.`` before ``forward()``).
_QUALIFIER_REACH = 200


def _skeleton(ref: RecordRef) -> bool:
    """Whether a mined record's message is a check macro's skeleton and nothing else.

    vLLM's ``CHECK_EQ({#a}, {#b}) failed. {a} vs {b}`` is the macro's own definition: its text
    is the macro's name and a few generic words, and every library that defines such a macro
    (flashinfer does) prints the same. Such a record matches only when the traceback goes
    through its library, as a message in Python's words must name its own.
    """
    words = _WORD_RUN.findall(" ".join(required_literals(ref.message_pattern) or ()))
    return (
        bool(words)
        and any(_MACRO.fullmatch(w) for w in words)
        and all(_MACRO.fullmatch(w) or w.lower() in _SKELETON_WORDS for w in words)
    )


def _through(library: str, paths: tuple[str, ...]) -> bool:
    """Whether a traceback path goes through the package of ``library``."""
    package = f"/{library.replace('-', '_')}/"
    return any(package in p for p in paths)


_WORD_RUN = lazy_re(r"[A-Za-z_][A-Za-z0-9_]*")
# A check macro's name (CHECK_EQ, TORCH_CHECK, ASSERT_GE), and the words such a macro adds.
_MACRO = lazy_re(r"[A-Z0-9_]*(?:CHECK|ASSERT)[A-Z0-9_]*")
_SKELETON_WORDS = frozenset(["failed", "vs", "expected", "got", "but", "to", "be", "true", "false"])


def _worded(ref: RecordRef) -> bool:
    """Whether a mined record's message is worded as Python words its own errors.

    Every skew record is, and any mined record whose pattern says ``got an unexpected keyword
    argument``, ``missing N required positional argument``, ``has no attribute``, ``cannot
    import name`` or ``No module named``: the library's class or module is what identifies it.
    """
    return _SKEW_TAG in ref.tags or _PYTHON_WORDINGS.search(ref.message_pattern) is not None


@attrs.frozen(kw_only=True)
class _Covers:
    r"""What a record in Python's words names, and the packages whose frames vouch for it.

    Attributes:
        names: the functions and modules the record names (short and dotted).
        classes: the classes the record lists (``skew.classes``, else the pattern's), short.
        owners: the classes whose members or methods it is about: ``classes``, and the owner
            in ``skew.name`` (``GenerationMixin`` of ``...GenerationMixin.contrastive_search``);
            for a record without ``skew``, every name its pattern writes.
        method: whether the record's call is a method's (a bare ``forward()`` is not its).
        packages: top-level packages of the library: a frame in one lets any message match.
        files: the files of the modules ``skew.name`` is in (``/transformers/cache_utils.py``):
            a frame in one is the record's raise site, as ``filePath`` is another record's.
        written: a hand-written record, whose pattern is a person's statement of what it covers
            (``'(?P<cache_class>\w*Cache)' object``): a class its match holds is covered; only
            a qualifier left outside its match (``MyThing.`` before ``__init__()``), or a bare
            method, is not.
    """

    names: frozenset[str]
    classes: frozenset[str]
    owners: frozenset[str]
    method: bool
    packages: frozenset[str]
    files: frozenset[str] = frozenset()
    written: bool = False

    @classmethod
    def of(cls, record: Record, library: str, *, written: bool = False) -> _Covers:
        """From the record's ``skew`` (its name and classes) and what its pattern names."""
        pattern = record.message_pattern
        names: set[str] = set()
        listed: set[str] = set()
        for group, quoted, dotted in _NAMED.findall(pattern):
            listed.update(group.split("|") if group else ())
            names.add(quoted.replace("\\.", ".") if quoted else dotted)
        owners: set[str] = set()
        packages = {library.replace("-", "_")}
        files: set[str] = set()
        skew = record.skew
        if skew is not None:
            parts = skew.name.partition("(")[0].split(".")
            # Its member and owner (a class, or the module of a module-level name), and each
            # module it is in, dotted: a module's own short name is no module Python prints.
            names.update(parts[-2:])
            names.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
            owners.update((*parts[-2:-1], *skew.classes))
            packages.update((parts[0], skew.distribution.replace("-", "_").lower()))
            for i in range(2, len(parts) + 1):
                folder = "/" + "/".join(parts[:i])
                files.update((folder + ".py", folder + "/__init__.py"))
            if skew.classes:
                listed = {c.rpartition(".")[2] for c in skew.classes}
        else:  # the pattern is all it says: a class written in it is one it covers
            owners.update(names)
        if record.file_path and "/" in record.file_path:
            packages.add(record.file_path.lstrip("/").partition("/")[0])
        return cls(
            names=frozenset(names - {""}),
            classes=frozenset(listed),
            owners=frozenset(owners | listed),
            method=_METHOD_CALL.search(pattern) is not None or bool(skew and skew.classes),
            packages=frozenset(packages - {""}),
            files=frozenset(files),
            written=written,
        )

    def site(self, paths: tuple[str, ...]) -> float:
        """The raise-site part of the score: a frame in a module of the record, or its library."""
        if any(path.endswith(f) for path in paths for f in self.files):
            return _SITE
        return _PACKAGE if self.framed(paths) else 0.0

    def framed(self, paths: tuple[str, ...]) -> bool:
        """Whether a frame of the traceback is in the library."""
        return any(f"/{p}/" in path for p in self.packages for path in paths)

    def named(self, subject: re.Match[str] | None, *, within: bool) -> str | None:
        """Whether the record covers what a message names: the class it names, if any.

        ``subject`` is a match of the subject pattern in the message, ``within`` whether it
        starts inside the record's match; the answer is the class (short), ``""`` for a covered
        function or module, ``None`` when it is not covered.
        """
        if subject is None:
            return None
        kind, value = next((k, v) for k, v in subject.groupdict().items() if v is not None)
        if kind == "call":
            parts = [p for p in value.split(".") if p and not p.startswith("<")]
            if len(parts) < 2:  # a bare name: a function of a module, never a class's method
                return "" if not self.method else None
            if self.written:
                return parts[-2] if within else None
            return parts[-2] if parts[-2] in self.owners else None
        if self.written:
            return value.rpartition(".")[2] if kind == "object" else ""
        if kind == "name":
            source = subject.group("source")
            return "" if value in self.names and source in self.names else None
        if kind == "object":  # a class, as Python prints it: short, or dotted for a C type
            short = value.rpartition(".")[2]
            return short if value in self.owners or short in self.owners else None
        return "" if value in self.names else None


def _claim(
    covers: _Covers, message: str, hit: regex.Match[str], paths: tuple[str, ...]
) -> str | None:
    """Whether a record in Python's words matches: the class the message names, or ``""``.

    The message must name what the record names (its class, function or module, read in the
    text the pattern matched and the qualified name just before it), or the traceback must pass
    through the library (a frame in one of :attr:`_Covers.packages`): the same words come from
    any user's own code. A bare ``forward()``, as Python 3.9 prints a method, names no class,
    so only a frame vouches for it. ``None``: the record does not match.
    """
    start = hit.start()
    low = max(0, start - _QUALIFIER_REACH)
    while start > low and (message[start - 1].isalnum() or message[start - 1] in "_.<>"):
        start -= 1
    subject = _SUBJECT.search(message, start, max(hit.end(), start))
    named = covers.named(subject, within=subject is not None and subject.start() >= hit.start())
    if named is not None:
        return named
    return "" if covers.framed(paths) else None


def _shown(record: Record, classes: frozenset[str], named: str) -> Record:
    """The record as the user should read it: the class it names is the message's class.

    A record of a member that many classes lost names one of them, or a few and a count, in
    its text ("`m` was removed from `LayoutLMv2ForTokenClassification`"); a user of
    ``LlamaForCausalLM`` reads ``LlamaForCausalLM`` there instead. Other names are kept.
    """
    if named not in classes:
        return record
    plural = False

    def one(m: re.Match[str]) -> str:
        nonlocal plural
        listed = re.findall(r"`(\w+)`", m.group())
        if not all(c in classes for c in listed) or listed == [named]:
            return m.group()
        plural = plural or m.group(1) is not None
        return f"`{named}`" + (" no longer has" if m.group(1) else "")

    def put(text: str) -> str:
        shown = _CLASS_LIST.sub(one, text)
        shown = _CLASS_DOT.sub(lambda m: named if m.group(1) in classes else m.group(1), shown)
        # "from `Cache` (and the 14 classes that inherit it)" said of the message's class: the
        # count was the base class's, not this one's.
        return _INHERITORS.sub("", shown) if shown != text else shown

    def singular(text: str) -> str:
        for many, single in _PLURAL:
            text = text.replace(many, single.format(named))
        return text

    documentation = put(record.documentation) if record.documentation else None
    solutions = tuple(map(put, record.solutions))
    if plural:
        documentation = documentation and singular(documentation)
        solutions = tuple(map(singular, solutions))
    if documentation == record.documentation and solutions == record.solutions:
        return record
    return attrs.evolve(record, documentation=documentation, solutions=solutions)


def _documented(record: Record, captures: Mapping[str | int, object]) -> Record:
    """The record with its documentation's ``{name}`` filled, when it names a capture.

    A miner may write the class a record covers as a capture (``'(?P<cls>...)' object``) and
    its text as ``{cls}``; the solutions are filled where every record's are (the diagnosis),
    the documentation here, so that it too names the class of the message.
    """
    text = record.documentation
    if not text or "{" not in text or not template_names(text)[0] & captures.keys():
        return record
    return attrs.evolve(record, documentation=fill_template(text, captures))


def _holds_run(message: str, run: str | None) -> bool:
    """Whether ``message`` holds ``run``, whatever whitespace a wrapped paste put in it."""
    if run is None:
        return False
    return run in message or " ".join(run.split()) in " ".join(message.split())


def _literal_run(pattern: str) -> str | None:
    """The longest literal run every match of ``pattern`` holds, if it is long enough alone."""
    runs = required_literals(pattern)
    return runs[0] if runs and len(runs[0]) >= LITERAL_RUN else None


class _Held(NamedTuple):
    """A mined match not made yet: it may fold into a hand-written one (see :func:`_fold`).

    ``classes`` and ``shown`` are what a record in Python's words covers and the class the
    message names, for its text (see :func:`_shown`); ``shown`` is ``""`` for other records.
    """

    record: Record
    library: str
    hit: regex.Match[str] | None
    score: float
    site: float
    worded: bool
    classes: frozenset[str]
    shown: str
    entry: _Entry  # whose place in the text is made once

    def built(self) -> Match:
        """The match, with its captures and its text as the user should read it."""
        record = _shown(self.record, self.classes, self.shown) if self.shown else self.record
        captures = _NO_CAPTURES if self.hit is None else _Captures(self.hit)
        if self.worded:
            record = _documented(record, captures)
        return Match(record=record, captures=captures, score=self.score, site=self.site)


#: A NamedTuple made from a tuple of its fields in C: its own constructor is Python.
_new = tuple.__new__


class _Written(NamedTuple):
    """A hand-written match not made yet: mined ones may fold into it (see :func:`_fold`).

    Ranked as a Match is (it has the fields the ranking reads), then made once, with the
    places folded into it.
    """

    record: Record
    captures: Mapping[str | int, object]
    score: float
    site: float
    by_site: bool = False

    def built(self, also: Sequence[str] = ()) -> Match:
        return Match(
            record=self.record,
            captures=self.captures,
            score=self.score,
            also=tuple(also),
            site=self.site,
        )


def _fold(
    found: list[_Written | _Held], by_site: list[Match], best: Mapping[str, float]
) -> list[Match]:
    """One message's matches, ranked, mined ones folded into hand-written ones of their library.

    A mined match of a library with a hand-written match folds into the first such match,
    unless it joins the hand-written tier (see :func:`_joins`): both matched the same message,
    so the mined record is the same error raised at another place or release. It is kept as an
    "also raised at" line, in the order :func:`ranked` would have put it, and no Match is made
    of it: only the mined matches that do not fold are made (:meth:`_Held.built`). One that
    holds the message's literal run alone is dropped: a message of its library that the
    hand-written record matched whole or cut is its own, and the run is what a sibling message
    shares (vLLM's CPU worker words the seed's message with another setting to raise).
    ``by_site`` are the matches of the raise site alone, ``best`` the hand-written ones'
    :func:`_best_sites`. Each Match is made once, last.
    """
    made: list[Match | _Written] = []
    folded: list[_Held] = []
    for m in found:
        if isinstance(m, _Written):
            made.append(m)
        elif m.library in best and not _joins(m.site, m.library, best):
            if m.hit is not None:  # a literal run alone does not say the message is its own
                folded.append(m)
        else:
            made.append(m.built())
    kept = _ranked([*made, *by_site], best)
    also: dict[int, list[str]] = {}
    if folded:
        written: dict[str, int] = {}
        for i, one in enumerate(kept):
            if isinstance(one, _Written) and FALLBACK_TAG not in one.record.tags:
                written.setdefault(one.record.library, i)
        # As ranked() orders mined matches that do not join the hand-written tier (stably).
        if len(folded) > 1:
            folded.sort(key=lambda m: (-m.score, *_lesser(m.record)))
        for held in folded:
            also.setdefault(written[held.library], []).append(held.entry.place(held.record))
    return [m.built(also.get(i, ())) if isinstance(m, _Written) else m for i, m in enumerate(kept)]


def _place(record: Record) -> str:
    """Where a mined record says its message is raised: ``path:line (distribution release)``.

    The release is the one whose sources that line was read in (its entry in
    ``versions.sites``). Not the message's range of releases: a message raised from several
    files over time is mined as one record a file, each holding the whole range, so the range
    beside one file would say that file raised it in releases where another did. No release
    when the sites do not list the line.
    """
    if not record.file_path:
        return record.id
    where = f"{record.file_path}:{record.line_number}"
    v = record.versions
    if v is None:
        return where
    read = [release for release, path, line in v.placed() if f"{path}:{line}" == where]
    return f"{where} ({v.distribution} {read[-1]})" if read else where


class _Captures(Mapping[str | int, object]):
    """A match's captures (:attr:`Match.captures`), typed when first read.

    A lookup or a scan line makes a Match of every record it finds, and most are ranked and
    never read (typing each group cost a seventh of a lookup's Python).
    """

    __slots__ = ("_hit", "_typed")

    def __init__(self, hit: regex.Match[str]) -> None:
        self._hit = hit
        self._typed: dict[str | int, object] | None = None

    def _values(self) -> dict[str | int, object]:
        typed = self._typed
        if typed is None:  # two threads may type it both: the same dict of the same hit
            typed = self._typed = _captures(self._hit)
        return typed

    def __getitem__(self, key: str | int) -> object:
        return self._values()[key]

    def __iter__(self) -> Iterator[str | int]:
        return iter(self._values())

    def __len__(self) -> int:
        return len(self._values())

    def __repr__(self) -> str:
        return repr(self._values())

    def __reduce__(self) -> tuple[type[dict[str | int, object]], tuple[dict[str | int, object]]]:
        return dict, (self._values(),)  # pickled as the dict it stands for


#: The captures of a match without groups read (a literal run's, a raise site's).
_NO_CAPTURES: Mapping[str | int, object] = MappingProxyType({})


def _captures(hit: regex.Match[str]) -> dict[str | int, object]:
    out: dict[str | int, object] = {name: typed(v) for name, v in hit.groupdict().items()}
    if len(out) < (hit.re.groups or 0):  # groups without a name too: by position
        positions = set(hit.re.groupindex.values())
        for index, value in enumerate(hit.groups(), 1):
            if index not in positions:
                out[index] = typed(value)
    return out
