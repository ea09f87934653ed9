"""Validation: a JSON value checked against the schema and the limits, made into a record.

The types come from the schema (:data:`~errkb.records._schema.FIELDS`); the limits and forms
beyond them (lengths, names, URLs, severities) and the pattern's own checks (it compiles, it is
not too loose, it matches its examples and misses its counterexamples) are here.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from errkb._lazy_regex import regex_errors
from errkb._patterns import (
    PatternTimeoutError,
    compile_pattern,
    literal_sets,
    search,
    template_names,
)
from errkb.exceptions import RecordError
from errkb.records._repos import REPOS, mined_link
from errkb.records._schema import (
    FIELDS,
    KEYS,
    SCHEMA_VERSION,
    SITE_TAG,
    SKEW_CHANGES,
    Record,
    SitePattern,
    Skew,
    Versions,
    camel,
    release_key,
)

if TYPE_CHECKING:
    import regex

#: The longest any one text field may be; a record is data to read, not a payload.
MAX_TEXT = 256 * 1024
#: The longest a pattern may be.
MAX_PATTERN = 8 * 1024
SEVERITIES = ("critical", "error", "warning", "info")
# errkb's own checks, in the standard library's engine (they need nothing of regex's, and
# compile in a third of the time).
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_ADVISOR = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}")

_KINDS = {
    "str": (str,),
    "int": (int,),
    "strs": (list, tuple),
    "bool": (bool,),
    "versions": (dict,),
    "skew": (dict,),
    "sites": (list, tuple),
}
_KIND_WORDS = {
    "str": "a string",
    "int": "an integer",
    "strs": "a list of strings",
    "bool": "a boolean",
    "versions": "an object",
    "skew": "an object",
    "sites": "a list of objects",
}


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
    for key, name, kind, required in FIELDS:
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
        if kind in _OBJECTS:
            value, why = _OBJECTS[kind](value)
            if value is None:
                problem(key, why)
                continue
        values[name] = value
    for key in sorted(set(data) - set(KEYS)):
        problem(key, "unknown field (not in schema version 2 or errkb's extensions)")
    _said_by_repos(values)
    if values.get("site_patterns") and SITE_TAG not in values.get("tags", ()):
        values["tags"] = (*values.get("tags", ()), SITE_TAG)
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
        except regex_errors() as exc:
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
        _check_templates(compiled, values, problem)
    return Record(**values, source=source), problems


def _check_templates(compiled: regex.Pattern[str], values: dict[str, Any], problem: Any) -> None:
    """Solutions may name the pattern's captures ({name}); each name must be one of its groups."""
    groups = set(compiled.groupindex)
    for i, text in enumerate(values.get("solutions", ())):
        names, braces = template_names(text)
        for text_problem in braces:
            problem("solutions", f"item {i}: {text_problem}")
        for name in sorted(names - groups):
            known = ", ".join(sorted(groups)) or "none"
            problem(
                "solutions",
                f"item {i}: {{{name}}} names no capture group of the pattern (groups: {known})",
            )


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _versions(value: dict[str, Any]) -> tuple[Versions | None, str]:
    """The ``versions`` object, or ``None`` and why not."""
    unknown = sorted(set(value) - {"distribution", "first", "last", "checked", "sites"})
    if unknown:
        return (
            None,
            f"unknown key {unknown[0]!r} (expected distribution, first, last, checked, sites)",
        )
    if not isinstance(value.get("distribution"), str) or not value["distribution"]:
        return None, 'needs "distribution", the name on PyPI'
    for key in ("first", "last", "checked"):
        if value.get(key) is not None and not isinstance(value[key], str):
            return None, f'"{key}": expected a version string, got {_json_kind(value[key])}'
    first, last = (release_key(value[k]) if value.get(k) else None for k in ("first", "last"))
    if first is not None and last is not None and first > last:
        return None, (
            f'"first" {value["first"]} is after "last" {value["last"]}: a range runs from the '
            "oldest release that raises the message to the newest"
        )
    sites = value.get("sites", {})
    if not isinstance(sites, dict) or not all(isinstance(v, str) for v in sites.values()):
        return None, '"sites": expected an object of version -> "path:line"'
    return Versions(
        distribution=value["distribution"],
        first=value.get("first"),
        last=value.get("last"),
        checked=value.get("checked"),
        sites=tuple(sites.items()),
    ), ""


def _skew(value: dict[str, Any]) -> tuple[Skew | None, str]:
    """The ``skew`` object, or ``None`` and why not."""
    keys = {"distribution", "name", "change", "changedIn", "lastBefore", "replacement"}
    keys |= {"exact", "classes"}
    unknown = sorted(set(value) - keys)
    if unknown:
        return None, f"unknown key {unknown[0]!r} (expected {', '.join(sorted(keys))})"
    for key in ("distribution", "name", "change"):
        if not isinstance(value.get(key), str) or not value[key]:
            return None, f'needs "{key}", a non-empty string'
    if value["change"] not in SKEW_CHANGES:
        return None, f'"change": expected one of {", ".join(SKEW_CHANGES)}, got {value["change"]!r}'
    for key in ("changedIn", "lastBefore", "replacement"):
        if value.get(key) is not None and not isinstance(value[key], str):
            return None, f'"{key}": expected a string, got {_json_kind(value[key])}'
    if value.get("exact") is not None and not isinstance(value["exact"], bool):
        return None, f'"exact": expected true or false, got {_json_kind(value["exact"])}'
    classes = value.get("classes", [])
    if not isinstance(classes, list) or not all(isinstance(c, str) and c for c in classes):
        return None, f'"classes": expected a list of non-empty strings, got {_json_kind(classes)}'
    return Skew(
        distribution=value["distribution"],
        name=value["name"],
        change=value["change"],
        changed_in=value.get("changedIn"),
        last_before=value.get("lastBefore"),
        replacement=value.get("replacement"),
        exact=value.get("exact"),
        classes=tuple(classes),
    ), ""


def _site_patterns(value: list[Any]) -> tuple[tuple[SitePattern, ...] | None, str]:
    """The ``sitePatterns`` list, or ``None`` and why not."""
    sites = []
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            return None, f"item {i}: expected an object, got {_json_kind(item)}"
        unknown = sorted(set(item) - {"file", "function"})
        if unknown:
            return None, f"item {i}: unknown key {unknown[0]!r} (expected file, function)"
        for key in ("file", "function"):
            if not isinstance(item.get(key), str) or not 0 < len(item[key].strip()) <= _SITE_MAX:
                return None, f'item {i}: needs "{key}", a non-empty string of {_SITE_MAX} at most'
        if not _SITE_FILE.fullmatch(item["file"]):
            return None, f'item {i}: "file": expected a path ending in .py, got {item["file"]!r}'
        sites.append(SitePattern(file=item["file"], function=item["function"]))
    return tuple(sites), ""


_SITE_MAX = 256
# A site's file: a relative path of a Python module, ``*`` standing for any characters.
_SITE_FILE = re.compile(r"[A-Za-z0-9_.*-]+(?:/[A-Za-z0-9_.*-]+)*\.py")
# The fields that are JSON objects (or lists of them), each with the reader that checks and
# builds it.
_OBJECTS: dict[str, Callable[[Any], tuple[object, str]]] = {
    "versions": _versions,
    "skew": _skew,
    "sites": _site_patterns,
}


def _check_shape(values: dict[str, Any], problem: Any) -> bool:
    """Limits and forms beyond the types; returns whether the record is unusable."""
    fatal = False
    for name, value in list(values.items()):
        if isinstance(value, str):
            longest = len(value)
        elif isinstance(value, (tuple, list)):
            longest = max((len(v) for v in value if isinstance(v, str)), default=0)
        else:
            continue
        if longest > MAX_TEXT:
            problem(
                camel(name),
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


def _said_by_repos(values: dict[str, Any]) -> None:
    """A mined record's repository and link, left out where :data:`REPOS` says them, put back.

    The link is the line at the tag of the newest release its ``versions.sites`` lists
    (:func:`errkb.records._repos.mined_link`).
    """
    versions = values.get("versions")
    if "mined" not in values.get("tags", ()) or not isinstance(versions, Versions):
        return
    known = REPOS.get(versions.distribution)
    if known is None:
        return
    values.setdefault("repo", known[0])
    path, line = values.get("file_path"), values.get("line_number")
    keys = [(k, r) for r in dict(versions.sites) if (k := release_key(r)) is not None]
    if "github_url" not in values and path and isinstance(line, int) and keys:
        values["github_url"] = mined_link(versions.distribution, max(keys)[1], path, line)


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
