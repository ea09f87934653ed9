"""The record schema: the :class:`Record` type, and the JSON keys derived from its fields.

A record is plain data: the dataset's schema version 2, plus errkb's extensions (``title``,
``examples``, ``counterexamples``, ``advisors``, ``retired``). JSON keys are camelCase and the
attributes snake_case; the mapping lives in one place, the field metadata, and the loader derives
all of its work from :func:`attrs.fields`.
"""

from __future__ import annotations

import fnmatch
import functools
import re
from typing import TYPE_CHECKING, Any

from errkb._attrs import attrs

if TYPE_CHECKING:
    from collections.abc import Iterable

    from errkb.records._refs import RecordRef

#: The one schema version this release reads.
SCHEMA_VERSION = 2

_PLACE_SUFFIX = re.compile(r"(?::\d+|\[\d+\])$")


def camel(name: str) -> str:
    """The JSON key of an attribute: ``error_message`` -> ``errorMessage``."""
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def as_tuple(values: Iterable[Any]) -> tuple[Any, ...]:
    """``values`` as a tuple: the converter of a value type's listed fields.

    A function of ours, not the builtin ``tuple``: for a builtin, attrs reads the converter's
    signature from its text form, which imports and compiles Python's tokenizer on the hook's
    path (about 10 ms of the first diagnosis).
    """
    return tuple(values)


def _field(kind: str, *, required: bool = False, extension: bool = False) -> Any:
    """A record field: its JSON kind, whether it is required, whether errkb added it."""
    listed = kind in ("strs", "sites")
    default: object = () if listed else (False if kind == "bool" else None)
    converter = as_tuple if listed else None
    return attrs.field(
        default=default,
        converter=converter,
        metadata={"kind": kind, "required": required, "extension": extension},
    )


@attrs.frozen(kw_only=True)
class Versions:
    """Which releases of which distribution raise the error (the record field ``versions``).

    Attributes:
        distribution: the distribution's name on PyPI (``vllm``, ``transformers``, ...).
        first: the earliest release known to raise it (``None``: not known, or older).
        last: the last release known to raise it (``None``: still raised by the newest checked).
        checked: the newest release checked, so that "still raised" has a date.
        sites: where each release raises it: ``{"0.2.7": "vllm/engine/llm_engine.py:290"}``.
    """

    distribution: str
    first: str | None = None
    last: str | None = None
    checked: str | None = None
    sites: tuple[tuple[str, str], ...] = ()

    def site_at(self, version: str) -> str | None:
        """Where ``version`` raises it: the site listed at the latest release not after it.

        ``sites`` lists a site at the first release of each run of releases that raise it
        there, as ``path:line``, or ``:line`` for the same file as the site listed before it;
        ``None`` when ``version`` is outside ``first``..``last`` or before every site.
        """
        key = release_key(version)
        if key is None:
            return dict(self.sites).get(version)
        for bound, after in ((self.first, False), (self.last, True)):
            edge = release_key(bound) if bound else None
            if edge is not None and (key > edge if after else key < edge):
                return None
        found = None
        for release, path, line in self.placed():
            at = release_key(release)  # placed() keeps only releases that read as versions
            if at is not None and at <= key:
                found = f"{path}:{line}"
        return found

    def placed(self) -> list[tuple[str, str, str]]:
        """The listed sites in release order, each as ``(release, path, line)``.

        A ``:line`` site is in the file of the site before it. Releases that do not read as
        versions are left out.
        """
        listed = sorted((k, r, w) for r, w in self.sites if (k := release_key(r)) is not None)
        out = []
        path = ""
        for _, release, where in listed:
            path = where.rpartition(":")[0] or path
            out.append((release, path, where.rpartition(":")[2]))
        return out

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"distribution": self.distribution}
        for key in ("first", "last", "checked"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.sites:
            out["sites"] = dict(self.sites)
        return out


# The standard library's engine: errkb's own pattern, compiled three times as fast as by regex.
_RELEASE = re.compile(r"(\d+(?:\.\d+)*)(?:(a|b|rc|\.?dev|\.?post)(\d*))?")
_PHASE = {"dev": -3, ".dev": -3, "a": -2, "b": -1, "rc": 0, None: 1, "post": 2, ".post": 2}


def release_key(version: str) -> tuple[tuple[int, ...], int, int] | None:
    """The order of release numbers, for sorting and comparing them; ``None``: not one.

    PEP 440's common forms (``4.52.0`` = ``4.52``, ``0.5.0rc1``, ``0.6.6.post1``, ``v2.1``; a
    local ``+cu121`` part is ignored), without needing ``packaging``.
    """
    found = _RELEASE.match(version.strip().lstrip("vV"))
    if found is None:
        return None
    numbers = tuple(int(n) for n in found.group(1).split("."))
    while len(numbers) > 1 and numbers[-1] == 0:
        numbers = numbers[:-1]
    return numbers, _PHASE.get(found.group(2), 1), int(found.group(3) or 0)


@attrs.frozen(kw_only=True)
class SitePattern:
    """A raise site that names a record's error where its message cannot (``sitePatterns``).

    A bare ``AssertionError`` or a ``KeyError`` holding one weight's name says nothing alone;
    raised by ChatTTS's model check or by a vLLM model's weight loader it says what happened.

    Attributes:
        file: the end of the raise frame's path, as a glob (``*`` any run of characters):
            ``ChatTTS/core.py``, ``vllm/model_executor/models/*.py``.
        function: the raise frame's function (``_infer``, ``load_weights``).
    """

    file: str
    function: str

    def matches(self, path: str, function: str) -> bool:
        """Whether a frame at ``path`` (either separator), in ``function``, is this site."""
        if function != self.function:
            return False
        path = "/" + path.replace("\\", "/").lstrip("/")
        return fnmatch.fnmatchcase(path, "*/" + self.file.lstrip("/"))

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "function": self.function}


#: The tag the loader gives a record with ``sitePatterns``, so that the few such records are
#: found from a listing's tags without reading every record.
SITE_TAG = "site-pattern"

#: What a :class:`Skew` says happened to a name between two releases.
SKEW_CHANGES = ("removed", "renamed", "moved", "added", "required")


@attrs.frozen(kw_only=True)
class Skew:
    """An error of version skew: code written for one release meets another (field ``skew``).

    Attributes:
        distribution: the distribution's name on PyPI.
        name: the dotted name that changed (``transformers.DynamicCache.get_max_length``, or a
            keyword as ``pkg.func(k)``).
        change: one of :data:`SKEW_CHANGES`: ``removed``, ``renamed`` or ``moved`` (gone from
            here in ``changed_in``), ``added`` (new in ``changed_in``: older releases lack it),
            ``required`` (a parameter without a default from ``changed_in`` on).
        changed_in: the first release with the change.
        last_before: the last release before the change (where the old form still works).
        replacement: the new name or place, when it was renamed or moved.
        exact: whether no release lies between ``last_before`` and ``changed_in``; ``False``:
            releases between them were not read, the change is somewhere among them.
        classes: the qualified names of the classes a member or method shows on (the class
            that defined it and those that inherited it), sorted, when the record covers
            several; the matcher reads them to tell the library's classes from a user's.
    """

    distribution: str
    name: str
    change: str
    changed_in: str | None = None
    last_before: str | None = None
    replacement: str | None = None
    exact: bool | None = None
    classes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"distribution": self.distribution, "name": self.name}
        out["change"] = self.change
        for key, attr in (
            ("changedIn", "changed_in"),
            ("lastBefore", "last_before"),
            ("replacement", "replacement"),
        ):
            if getattr(self, attr) is not None:
                out[key] = getattr(self, attr)
        if self.exact is not None:
            out["exact"] = self.exact
        if self.classes:
            out["classes"] = list(self.classes)
        return out


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
    error_classes: tuple[str, ...] = _field("strs", extension=True)
    history: str | None = _field("str", extension=True)
    # ruff cannot tell that _field returns an attrs field (RUF009), as with the others above.
    versions: Versions | None = _field("versions", extension=True)
    skew: Skew | None = _field("skew", extension=True)
    site_patterns: tuple[SitePattern, ...] = _field("sites", extension=True)
    #: Where the record was read from (a path, or ``<dict>``); not part of the JSON.
    source: str = attrs.field(default="<dict>", eq=False, metadata={"kind": None})

    @property
    def heading(self) -> str:
        """The title when the record has one, else the slug."""
        return self.title or self.slug

    @property
    def library(self) -> str:
        """The library the record belongs to: the folder it lives in, else its repository."""
        return library_of(self.source, self.repo)

    def brief(self) -> dict[str, object]:
        """The fields that name the record in outputs: id, slug, title, severity."""
        return brief(self)

    def to_json(self) -> dict[str, Any]:
        """The record as a JSON object with the dataset's camelCase keys."""
        out: dict[str, Any] = {}
        for f in _json_fields():
            value = getattr(self, f.name)
            if isinstance(value, (Versions, Skew)):
                value = value.to_json()
            elif f.metadata["kind"] == "sites":
                value = [site.to_json() for site in value]
            out[camel(f.name)] = list(value) if isinstance(value, tuple) else value
        return out


def brief(r: Record | RecordRef) -> dict[str, object]:
    """What :meth:`Record.brief` and :meth:`RecordRef.brief` give, from either."""
    return {"id": r.id, "slug": r.slug, "title": r.title, "severity": r.severity}


@functools.lru_cache(maxsize=1 << 14)  # a match asks for its record's library several times
def library_of(source: str, repo: str | None) -> str:
    """What :attr:`Record.library` and :attr:`RecordRef.library` give, from the two fields.

    A mined pack (``records/mined/vllm.jsonl``) belongs to the distribution its name gives.
    """
    # Plain string work (as pathlib would split it): this runs for every match.
    file = _PLACE_SUFFIX.sub("", source) if source[-1:].isdigit() or source[-1:] == "]" else source
    parts = ["", "", *(p for p in file.replace("\\", "/").split("/") if p not in ("", "."))]
    top, folder, name = parts[-3:]
    if folder == "mined" and top in ("records", "_records"):
        return name.partition(".")[0]
    if top in ("records", "_records"):
        return folder
    return (repo or "unknown").rsplit("/", 1)[-1].lower()


def _json_fields() -> tuple[attrs.Attribute[Any], ...]:
    return tuple(f for f in attrs.fields(Record) if f.metadata.get("kind"))


#: The field of each JSON key.
KEYS = {camel(f.name): f for f in _json_fields()}
#: Attribute -> JSON key, for reading one field of a record's JSON without building it.
JSON_KEYS = {f.name: key for key, f in KEYS.items()}
#: (JSON key, attribute, kind, required) for every field, derived once from the attrs metadata.
FIELDS = tuple((k, f.name, f.metadata["kind"], f.metadata["required"]) for k, f in KEYS.items())
