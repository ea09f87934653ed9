"""The record model and the loader that reads and validates record files.

A record is plain data: the dataset's schema version 2, plus errkb's extensions (``title``,
``examples``, ``counterexamples``, ``advisors``, ``retired``). JSON keys are camelCase and the
attributes snake_case; the mapping lives in one place, the field metadata, and the loader derives
all of its work from :func:`attrs.fields`.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import attrs
import regex

from errkb._patterns import PatternTimeoutError, compile_pattern, literal_sets, search
from errkb.exceptions import RecordError

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Sequence

__all__ = [
    "SCHEMA_VERSION",
    "LoadResult",
    "Record",
    "RecordRef",
    "jsonl_values",
    "load_paths",
    "load_refs",
    "record_from_dict",
]

#: The one schema version this release reads.
SCHEMA_VERSION = 2

_PLACE_SUFFIX = regex.compile(r"(?::\d+|\[\d+\])$")
_KINDS = {"str": (str,), "int": (int,), "strs": (list, tuple), "bool": (bool,)}
_KIND_WORDS = {
    "str": "a string",
    "int": "an integer",
    "strs": "a list of strings",
    "bool": "a boolean",
}


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def _field(kind: str, *, required: bool = False, extension: bool = False) -> Any:
    """A record field: its JSON kind, whether it is required, whether errkb added it."""
    default: object = () if kind == "strs" else (False if kind == "bool" else None)
    converter = tuple if kind == "strs" else None
    return attrs.field(
        default=default,
        converter=converter,
        metadata={"kind": kind, "required": required, "extension": extension},
    )


@attrs.frozen(kw_only=True)
class Record:
    """One known error: how to recognise it, where it comes from, why, and what to do.

    Build one from JSON with :func:`record_from_dict`; see ``docs/records.md`` for every field.
    """

    schema_version: int = _field("int", required=True)
    id: str = _field("str", required=True)
    slug: str = _field("str", required=True)
    title: str | None = _field("str", extension=True)
    repo: str | None = _field("str")
    error_code: str | None = _field("str")
    error_message: str = _field("str", required=True)
    message_pattern: str = _field("str", required=True)
    error_type: str | None = _field("str")
    error_class: str | None = _field("str")
    http_status: int | None = _field("int")
    severity: str | None = _field("str")
    file_path: str | None = _field("str")
    line_number: int | None = _field("int")
    source_code: str | None = _field("str")
    source_code_start: int | None = _field("int")
    source_code_end: int | None = _field("int")
    github_url: str | None = _field("str")
    documentation: str | None = _field("str")
    trigger_scenarios: str | None = _field("str")
    common_situations: str | None = _field("str")
    solutions: tuple[str, ...] = _field("strs")
    example_fix: str | None = _field("str")
    handling_strategy: str | None = _field("str")
    validation_code: str | None = _field("str")
    type_guard: str | None = _field("str")
    try_catch_pattern: str | None = _field("str")
    prevention_tips: tuple[str, ...] = _field("strs")
    tags: tuple[str, ...] = _field("strs")
    background_tag: str | None = _field("str")
    analyzed_sha: str | None = _field("str")
    analyzed_at: str | None = _field("str")
    examples: tuple[str, ...] = _field("strs", extension=True)
    counterexamples: tuple[str, ...] = _field("strs", extension=True)
    advisors: tuple[str, ...] = _field("strs", extension=True)
    retired: bool = _field("bool", extension=True)
    variant_of: str | None = _field("str", extension=True)
    #: Where the record was read from (a path, or ``<dict>``); not part of the JSON.
    source: str = attrs.field(default="<dict>", eq=False, metadata={"kind": None})

    @property
    def heading(self) -> str:
        """The title when the record has one, else the slug."""
        return self.title or self.slug

    @property
    def library(self) -> str:
        """The library the record belongs to: the folder it lives in, else its repository."""
        return _library(self.source, self.repo)

    def brief(self) -> dict[str, object]:
        """The fields that name the record in outputs: id, slug, title, severity."""
        return _brief(self)

    def to_json(self) -> dict[str, Any]:
        """The record as a JSON object with the dataset's camelCase keys."""
        out: dict[str, Any] = {}
        for f in _json_fields():
            value = getattr(self, f.name)
            out[_camel(f.name)] = list(value) if isinstance(value, tuple) else value
        return out


def _brief(r: Record | RecordRef) -> dict[str, object]:
    return {"id": r.id, "slug": r.slug, "title": r.title, "severity": r.severity}


def _library(source: str, repo: str | None) -> str:
    folder = Path(_PLACE_SUFFIX.sub("", source)).parent
    if folder.parent.name in ("records", "_records"):
        return folder.name
    return (repo or "unknown").rsplit("/", 1)[-1].lower()


_UNREAD: Any = object()


class Body(Protocol):
    """Where a ref's whole record comes from: the record itself, or a line of a pack."""

    @property
    def source(self) -> str:
        """The place, as :attr:`Record.source` says it."""
        ...

    def read(self, record_id: str) -> Record:
        """The record; :class:`~errkb.exceptions.RegistryError` if it is gone."""
        ...


class _Kept:
    """The body of a record kept whole in memory."""

    __slots__ = ("record",)

    def __init__(self, record: Record) -> None:
        self.record = record

    @property
    def source(self) -> str:
        return self.record.source

    def read(self, record_id: str) -> Record:  # noqa: ARG002 - the Body protocol
        return self.record


class RecordRef:
    """A record as the registry keeps it: in memory, what matching, ranking and listing need.

    The rest of the record (its documentation, solutions, source code, ...) is its *body*:
    either the :class:`Record` itself, or, for records of a large ``.jsonl`` pack (see
    :mod:`errkb.packs`), a place in that file, read by :meth:`load` when the record is first
    needed. A registry of 100k records so keeps a few hundred bytes for each.
    """

    __slots__ = (
        "_body",
        "_record",
        "error_class",
        "file_path",
        "id",
        "keys",
        "message_pattern",
        "repo",
        "retired",
        "sets",
        "severity",
        "slug",
        "tags",
        "title",
        "variant_of",
    )

    def __init__(
        self,
        *,
        id: str,  # noqa: A002 - the record's field name
        slug: str,
        title: str | None,
        severity: str | None,
        repo: str | None,
        message_pattern: str,
        error_class: str | None,
        file_path: str | None,
        retired: bool,
        variant_of: str | None,
        tags: tuple[str, ...],
        sets: tuple[tuple[str, ...], ...] | None = _UNREAD,
        keys: Sequence[tuple[str, str]] | None = None,
        body: Body,
    ) -> None:
        self.id, self.slug, self.title, self.severity = id, slug, title, severity
        self.repo, self.message_pattern, self.error_class = repo, message_pattern, error_class
        self.file_path, self.retired, self.variant_of, self.tags = (
            file_path,
            retired,
            variant_of,
            tags,
        )
        # The literal analysis of the pattern and the index keys, when a pack cache has them.
        self.sets, self.keys = sets, keys
        self._body = body
        # The whole record once read (at once for a record kept in memory).
        self._record = body.record if isinstance(body, _Kept) else None

    @classmethod
    def of(cls, record: Record, *, body: Body | None = None) -> RecordRef:
        """The ref of a record: kept whole, or, given its ``body``, to be read again from it."""
        return cls(
            id=record.id,
            slug=record.slug,
            title=record.title,
            severity=record.severity,
            repo=record.repo,
            message_pattern=record.message_pattern,
            error_class=record.error_class,
            file_path=record.file_path,
            retired=record.retired,
            variant_of=record.variant_of,
            tags=record.tags,
            body=body or _Kept(record),
        )

    def __repr__(self) -> str:
        return f"RecordRef({self.id!r})"

    @property
    def source(self) -> str:
        """Where the record was read from, as :attr:`Record.source` says it."""
        return self._body.source

    @property
    def heading(self) -> str:
        """As :attr:`Record.heading`."""
        return self.title or self.slug

    def brief(self) -> dict[str, object]:
        """As :meth:`Record.brief`."""
        return _brief(self)

    @property
    def library(self) -> str:
        """As :attr:`Record.library`."""
        return _library(self.source, self.repo)

    def literal_sets(self) -> tuple[tuple[str, ...], ...] | None:
        """What every match of the pattern must contain (see :func:`errkb._patterns.literal_sets`)."""
        if self.sets is _UNREAD:
            self.sets = literal_sets(self.message_pattern)
        return self.sets

    def load(self) -> Record:
        """The whole record, read from its file the first time it is needed."""
        if self._record is None:
            self._record = self._body.read(self.id)
        return self._record


def _json_fields() -> tuple[attrs.Attribute[Any], ...]:
    return tuple(f for f in attrs.fields(Record) if f.metadata.get("kind"))


_KEYS = {_camel(f.name): f for f in _json_fields()}
# (JSON key, attribute, kind, required) for every field, derived once from the attrs metadata.
_SCHEMA = tuple((k, f.name, f.metadata["kind"], f.metadata["required"]) for k, f in _KEYS.items())


@attrs.frozen(kw_only=True)
class LoadResult:
    """What loading gave: the valid records, and one :class:`RecordError` per problem found."""

    records: tuple[Record, ...]
    problems: tuple[RecordError, ...]


def record_from_dict(  # noqa: PLR0915 - one pass over the schema reads best in order
    data: object, *, source: str = "<dict>", validate: bool = True
) -> tuple[Record | None, list[RecordError]]:
    """Build a :class:`Record` from a JSON object, bare or in the dataset's wrapped form.

    Returns the record (``None`` when it is unusable) and the problems found. A record with only
    minor problems (an unknown field, an example its pattern misses) is still returned. With
    ``validate=False`` the field types are still checked, but the pattern is neither compiled
    nor run on the examples (for records already validated, such as the built-in ones).
    """
    if isinstance(data, dict) and "record" in data and "datasetVersion" in data:
        if not isinstance(data["record"], dict):
            got = _json_kind(data["record"])
            return None, [RecordError(source, f'field "record": expected an object, got {got}')]
        data = data["record"]
    elif isinstance(data, dict) and isinstance(data.get("record"), dict):
        data = data["record"]
    if not isinstance(data, dict):
        return None, [RecordError(source, f"expected a JSON object, got {_json_kind(data)}")]
    raw_id = data.get("id")
    rid = _short(raw_id) if isinstance(raw_id, str) and raw_id else None
    problems: list[RecordError] = []

    def problem(field: str | None, text: str) -> None:
        problems.append(RecordError(source, text, record_id=rid, field=field))

    values: dict[str, Any] = {}
    fatal = False
    for key, name, kind, required in _SCHEMA:
        value = data.get(key)
        if value is None:
            if required:
                problem(key, "missing required field")
                fatal = True
            continue
        ok = isinstance(value, _KINDS[kind]) and not (kind == "int" and isinstance(value, bool))
        if ok and kind == "strs":
            ok = all(isinstance(item, str) for item in value)
        if not ok:
            problem(key, f"expected {_KIND_WORDS[kind]}, got {_json_kind(value)}")
            fatal = fatal or required
            continue
        if required and kind == "str" and not value.strip():
            problem(key, "expected a non-empty string")
            fatal = True
            continue
        values[name] = value
    for key in sorted(set(data) - set(_KEYS)):
        problem(key, "unknown field (not in schema version 2 or errkb's extensions)")
    fatal = _check_shape(values, problem) or fatal
    version = values.get("schema_version")
    if version is not None and version != SCHEMA_VERSION:
        problem("schemaVersion", f"unknown schema version {version!r}, expected {SCHEMA_VERSION}")
        fatal = True
    pattern = values.get("message_pattern")
    loose = not fatal and isinstance(pattern, str) and _too_loose(pattern)
    if not validate and not loose:
        pattern = None
    compiled = None
    if pattern is not None and not fatal:
        try:
            compiled = compile_pattern(pattern)
        except regex.error as exc:
            # The regex module's error carries the message and the position as attributes.
            pos, msg = getattr(exc, "pos", None), getattr(exc, "msg", str(exc))
            where = f" at position {pos}" if pos is not None else ""
            problem("messagePattern", f"invalid regex ({msg}{where})")
            fatal = True
        except (RecursionError, OverflowError, MemoryError) as exc:
            problem("messagePattern", f"regex could not be compiled ({type(exc).__name__})")
            fatal = True
    if loose and not fatal:
        problem(
            "messagePattern",
            "the pattern requires no literal text of 3 characters or more, so it would match "
            f"almost any message: {_short(str(pattern))!r}",
        )
        fatal = True
    if fatal:
        return None, problems
    if compiled is not None:
        _check_examples(compiled, values, problem)
    return Record(**values, source=source), problems


#: The longest any one text field may be; a record is data to read, not a payload.
MAX_TEXT = 256 * 1024
#: The longest a pattern may be.
MAX_PATTERN = 8 * 1024
SEVERITIES = ("critical", "error", "warning", "info")
_NAME = regex.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_ADVISOR = regex.compile(r"[a-z0-9][a-z0-9_.-]{0,63}")


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _check_shape(values: dict[str, Any], problem: Any) -> bool:
    """Limits and forms beyond the types; returns whether the record is unusable."""
    fatal = False
    for name, value in list(values.items()):
        if isinstance(value, str):
            longest = len(value)
        elif isinstance(value, (tuple, list)):
            longest = max(map(len, value), default=0)
        else:
            continue
        if longest > MAX_TEXT:
            problem(
                _camel(name),
                f"a string of {longest:,} characters, more than the {MAX_TEXT:,} allowed",
            )
            fatal = True
    for name in ("id", "slug"):
        value = values.get(name)
        if isinstance(value, str) and not _NAME.fullmatch(value):
            problem(
                name,
                f"expected letters, digits, '.', '_' or '-' (128 at most), got {_short(value)!r}",
            )
            fatal = True
    for name in values.get("advisors", ()):
        if not _ADVISOR.fullmatch(name):
            problem("advisors", f"expected advisor names such as 'kv-cache', got {_short(name)!r}")
            fatal = True
    pattern = values.get("message_pattern")
    if isinstance(pattern, str) and len(pattern) > MAX_PATTERN:
        problem(
            "messagePattern",
            f"a pattern of {len(pattern):,} characters, more than the {MAX_PATTERN:,} allowed",
        )
        fatal = True
    url = values.get("github_url")
    if isinstance(url, str) and not url.startswith("https://"):
        problem("githubUrl", f"expected an https:// URL, got {_short(url)!r}")
        values.pop("github_url")
    severity = values.get("severity")
    if isinstance(severity, str) and severity not in SEVERITIES:
        problem("severity", f"expected one of {', '.join(SEVERITIES)}, got {_short(severity)!r}")
        values.pop("severity")
    return fatal


def _too_loose(pattern: str) -> bool:
    """Whether a pattern requires no literal of 3 characters or more (unknown: not loose)."""
    sets = literal_sets(pattern)
    return sets is not None and not any(min(len(x) for x in s) >= 3 for s in sets)


def _check_examples(compiled: regex.Pattern[str], values: dict[str, Any], problem: Any) -> None:
    for key, want in (("examples", True), ("counterexamples", False)):
        for i, text in enumerate(values.get(key, ())):
            try:
                hit = search(compiled, text) is not None
            except PatternTimeoutError:
                problem(key, f"item {i}: the pattern timed out on it")
                continue
            if hit != want:
                expectation = "does not match" if want else "matches, but must not"
                problem(
                    key, f"item {i}: the record's own pattern {expectation}: {_short(text, 80)!r}"
                )


def _json_kind(value: object) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, (int, float)):
        return f"a number ({value!r})"
    return names.get(type(value), type(value).__name__)


def _files(path: Path, problems: list[RecordError]) -> Iterator[Path]:
    """The record files at ``path``: itself, or every .json/.jsonl below it, sorted, no loops.

    A folder that cannot be listed is reported in ``problems`` and passed over.
    """

    def walk_error(error: OSError) -> None:
        where = error.filename or str(path)
        problems.append(
            RecordError(str(where), f"cannot list the folder ({error.strerror or error})")
        )

    if not path.is_dir():
        yield path
        return
    seen: set[tuple[int, int]] = set()
    for root, dirs, names in os.walk(path, followlinks=True, onerror=walk_error):
        try:
            st = Path(root).stat()
        except OSError:
            dirs.clear()
            continue
        if (st.st_dev, st.st_ino) in seen:
            dirs.clear()
            continue
        seen.add((st.st_dev, st.st_ino))
        dirs.sort()
        for name in sorted(names):
            if name.endswith((".json", ".jsonl")):
                yield Path(root) / name


#: The largest record file read; a bigger one is reported, not loaded.
MAX_FILE = 256 * 1024 * 1024


#: The longest line of a .jsonl file read.
MAX_LINE = 16 * 1024 * 1024


def _items(path: Path, label: str, problems: list[RecordError]) -> Iterator[tuple[object, str]]:
    """The JSON values in one file, each with the label of its place; problems are appended.

    A ``.jsonl`` file is streamed line by line, so a pack of any size is read in constant
    memory; a ``.json`` file is read whole, up to :data:`MAX_FILE` bytes.
    """
    try:
        st = path.stat()
        if not stat.S_ISREG(st.st_mode):
            # A FIFO or a device (a link to /dev/zero, say) would block or never end.
            problems.append(RecordError(label, "not a regular file, skipped"))
            return
        if path.suffix == ".jsonl":
            yield from _jsonl(path, label, problems)
            return
        if st.st_size > MAX_FILE:
            problems.append(
                RecordError(
                    label, f"a file of {st.st_size:,} bytes, more than the {MAX_FILE:,} read"
                )
            )
            return
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(RecordError(label, f"cannot read the file ({_reason(exc)})"))
        return
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        problems.append(RecordError(label, f"invalid JSON ({exc.msg} at {where})"))
        return
    except RecursionError:
        problems.append(RecordError(label, "invalid JSON (nested too deeply)"))
        return
    if isinstance(data, list):
        yield from ((item, f"{label}[{i}]") for i, item in enumerate(data))
    else:
        yield data, label


def _jsonl(path: Path, label: str, problems: list[RecordError]) -> Iterator[tuple[object, str]]:
    for data, n, _offset, _length in jsonl_values(path, label, problems):
        yield data, f"{label}:{n}"


def jsonl_values(
    path: Path, label: str, problems: list[RecordError]
) -> Iterator[tuple[object, int, int, int]]:
    """Each JSON value of a ``.jsonl`` file, with its line number, byte offset and length.

    Blank lines are skipped; a line that is too long or not JSON is reported in ``problems``.
    """
    try:
        with path.open("rb") as file:
            offset = 0
            for n, raw in enumerate(iter(lambda: file.readline(MAX_LINE + 1), b""), 1):
                at, offset = offset, offset + len(raw)
                if len(raw) > MAX_LINE:
                    problems.append(
                        RecordError(f"{label}:{n}", f"a line longer than {MAX_LINE:,} bytes")
                    )
                    offset += len(file.readline())  # the rest of that line
                    continue
                if not raw.strip():
                    continue
                try:
                    yield json.loads(raw), n, at, len(raw)
                except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                    problems.append(
                        RecordError(f"{label}:{n}", f"invalid JSON ({getattr(exc, 'msg', exc)})")
                    )
                except RecursionError:
                    problems.append(RecordError(f"{label}:{n}", "invalid JSON (nested too deeply)"))
    except OSError as exc:
        problems.append(RecordError(label, f"cannot read the file ({_reason(exc)})"))


def _reason(exc: Exception) -> str:
    return exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)


def load_paths(
    paths: Iterable[str | os.PathLike[str]],
    *,
    strict: bool = False,
    validate: bool = True,
    trusted: Iterable[str | os.PathLike[str]] = (),
) -> LoadResult:
    """Load and validate every record at ``paths`` (files or folders), in order.

    A bad record is reported and skipped; the rest still load. A record whose id is already
    taken by an earlier one is a problem too. With ``strict=True`` the first problem is raised
    as :class:`~errkb.exceptions.RecordError` instead. ``validate=False`` skips compiling the
    patterns and checking the examples (see :func:`record_from_dict`); ``trusted`` names paths
    loaded that way while the others are validated.
    """
    problems: list[RecordError] = []
    found = _load(paths, problems, strict=strict, validate=validate, trusted=trusted, refs=False)
    records = tuple(r for r in found if isinstance(r, Record))
    return LoadResult(records=records, problems=tuple(problems))


def load_refs(
    paths: Iterable[str | os.PathLike[str]],
    *,
    strict: bool = False,
    trusted: Iterable[str | os.PathLike[str]] = (),
) -> tuple[list[RecordRef], list[RecordError]]:
    """Load as :func:`load_paths` does, into the refs a registry keeps.

    The ``.jsonl`` packs among the ``trusted`` paths are read as :class:`RecordRef` whose bodies
    load on demand (see :mod:`errkb.packs`); the other records are loaded whole and validated.
    """
    problems: list[RecordError] = []
    found = _load(paths, problems, strict=strict, validate=True, trusted=trusted, refs=True)
    return [r if isinstance(r, RecordRef) else RecordRef.of(r) for r in found], problems


def _load(
    paths: Iterable[str | os.PathLike[str]],
    problems: list[RecordError],
    *,
    strict: bool,
    validate: bool,
    trusted: Iterable[str | os.PathLike[str]],
    refs: bool,
) -> Iterator[Record | RecordRef]:
    skip = {os.fspath(p) for p in trusted}
    seen: dict[str, Record | RecordRef] = {}
    for given in paths:
        top = Path(given)
        if not top.exists():
            problems.append(RecordError(str(given), "no such file or folder"))
            continue
        checked = validate and os.fspath(given) not in skip
        for file in _files(top, problems):
            label = _label(file, top, given)
            found: Iterable[Record | RecordRef]
            if refs and not checked and file.suffix == ".jsonl":
                from errkb.packs import load_pack

                found = load_pack(file, label, problems)
            else:
                found = _records_in(file, label, problems, validate=checked)
            for record in found:
                first = seen.setdefault(record.id, record)
                if first is not record:
                    problems.append(
                        RecordError(
                            record.source,
                            f"duplicate id, already defined in {first.source}",
                            record_id=record.id,
                            field="id",
                        )
                    )
                    continue
                yield record
            if strict and problems:
                raise problems[0]


def _records_in(
    file: Path, label: str, problems: list[RecordError], *, validate: bool
) -> Iterator[Record]:
    for data, where in _items(file, label, problems):
        record, found = record_from_dict(data, source=where, validate=validate)
        problems.extend(found)
        if record is not None:
            yield record


def _label(file: Path, top: Path, given: str | os.PathLike[str]) -> str:
    if file == top:
        return os.fspath(given)
    return str(Path(given) / file.relative_to(top))
