"""Where the release in use raises a mined record's error: its file, line and link.

A mined record's ``filePath``, ``lineNumber`` and ``githubUrl`` are those of the newest release
that raises it; a user of an older release reads a file their release may not have. Its
``versions.sites`` says where each release raises it (:meth:`Versions.site_at`), so the site
shown is that of the release in use, known, in the order the caller gives, from:

- the installed release (the ``installed`` probe) or a release the pasted text states;
- the traceback: a frame whose file is one of the sites' paths, which narrows the releases to
  those that raise it in that file (at that line when the line matches too);

and otherwise the range: the releases that raise it and the lines they raise it at.

The link is rebuilt for that release from the record's own link (its tag with the version
swapped, the repository folder kept), so no table of repositories is needed here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import regex

from errkb._attrs import attrs
from errkb.records import release_key

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from errkb.records import Record, Versions

__all__ = ["BASES", "Site", "site_for"]

#: How the release in use was known: read from the installed metadata, stated in the pasted
#: text, or narrowed by the traceback's file paths.
BASES = ("installed", "stated", "traceback")


@attrs.frozen(kw_only=True)
class Site:
    """Where a record's error is raised, for the release in use when it is known.

    Attributes:
        distribution: the distribution that raises it.
        release: the release in use (``None``: not known). With ``basis == "traceback"`` it is
            the first release that raises it in the traceback's file, and ``until`` the first
            release that no longer does (``None``: up to the newest).
        basis: how the release was known, one of :data:`BASES`, or ``None``.
        raises: whether that release raises it by the record's versions (``None``: unknown).
        file, line, url: the site in that release, and its link at that release's tag.
        first, last, checked: the record's releases (``last`` ``None``: still raised by
            ``checked``, the newest mined).
        spread: with no release known, where the releases raise it: ``path:40-41 (a to b)``.
    """

    distribution: str
    release: str | None = None
    basis: str | None = None
    until: str | None = None
    raises: bool | None = None
    file: str | None = None
    line: int | None = None
    url: str | None = None
    first: str | None = None
    last: str | None = None
    checked: str | None = None
    spread: tuple[str, ...] = ()

    def releases(self) -> str:
        """The releases that raise it, in words: ``vllm 0.2.7 to 0.9.2``."""
        return releases_text(self.distribution, self.first, self.last, self.checked)

    def to_dict(self) -> dict[str, object]:
        """The JSON form."""
        return {
            "distribution": self.distribution,
            "release": self.release,
            "basis": self.basis,
            "until": self.until,
            "raises": self.raises,
            "file": self.file,
            "line": self.line,
            "url": self.url,
            "releases": {"first": self.first, "last": self.last, "checked": self.checked},
            "spread": list(self.spread),
        }


def releases_text(dist: str, first: str | None, last: str | None, checked: str | None) -> str:
    """``transformers 4.36.2 to 4.51.3``; ``vllm 0.10.0 and later (to 0.33.0, the newest checked)``."""
    if last is not None:
        return f"{dist} {first} to {last}" if first and first != last else f"{dist} {last}"
    if first is not None and first == checked:
        return f"{dist} {first} (the newest checked)"
    start = f"{dist} {first} and later" if first else f"every {dist} release checked"
    return f"{start} (to {checked}, the newest checked)" if checked else start


@attrs.frozen
class _Run:
    """Releases ``since`` up to (not including) ``until`` raise it at ``path:line``."""

    since: str
    until: str | None
    path: str
    line: int


def _runs(versions: Versions) -> list[_Run]:
    placed = versions.placed()
    runs: list[_Run] = []
    for i, (release, path, line) in enumerate(placed):
        if not path or not line.isdigit():
            continue
        until = placed[i + 1][0] if i + 1 < len(placed) else None
        runs.append(_Run(since=release, until=until, path=path, line=int(line)))
    return runs


def _within(versions: Versions, release: str) -> bool | None:
    key = release_key(release)
    if key is None:
        return None
    first = release_key(versions.first) if versions.first else None
    last = release_key(versions.last) if versions.last else None
    return (first is None or key >= first) and (last is None or key <= last)


_BLOB = regex.compile(
    r"^(?P<repo>https://github\.com/[^/]+/[^/]+)/blob/(?P<tag>[^/]+)/(?P<path>[^#]+)"
)
_PUBLIC = regex.compile(r"^\d+(?:\.\d+)*(?:(?:a|b|rc)\d+|\.post\d+)?$")


def link(record: Record, release: str, path: str, line: int) -> str | None:
    """The record's link rebuilt for ``path:line`` at ``release``'s tag; ``None``: no link.

    The tag's form (``v{}``, ``{}``) and the repository folder the package lives in
    (``src/``) are read from the record's own link, whose tag names the newest release that
    raises it. A release that has no tag (a local ``+cu121`` part is dropped; a ``.dev``
    build has none) gives no link.

    >>> from errkb.testing import record_dict
    >>> from errkb.records import record_from_dict
    >>> r, _ = record_from_dict(record_dict(filePath="transformers/activations.py",
    ...     githubUrl="https://github.com/huggingface/transformers/blob/v4.51.3/src/"
    ...     "transformers/activations.py#L40-L43"))
    >>> link(r, "4.36.2", "transformers/activations.py", 41)
    'https://github.com/huggingface/transformers/blob/v4.36.2/src/transformers/activations.py#L41'
    """
    m = _BLOB.match(record.github_url or "")
    public = release.split("+", 1)[0]
    if m is None or not record.file_path or not _PUBLIC.match(public):
        return None
    if record.file_path == path and record.line_number == line and _tag_release(m["tag"], public):
        return record.github_url  # the newest release's own link keeps its span of lines
    if not m["path"].endswith(record.file_path):
        return None
    prefix = m["path"][: len(m["path"]) - len(record.file_path)]
    tag = _tag_parts(m["tag"])
    if tag is None:
        return None
    return f"{m['repo']}/blob/{tag[0]}{public}/{prefix}{path}#L{line}"


def link_release(record: Record) -> str | None:
    """The release the record's own link is at, read from its tag (``v0.3.3`` -> ``0.3.3``)."""
    m = _BLOB.match(record.github_url or "")
    tag = _tag_parts(m["tag"]) if m is not None else None
    return tag[1] if tag is not None else None


def _tag_parts(tag: str) -> tuple[str, str] | None:
    """A tag's form and release: ``v0.3.3`` -> ``("v", "0.3.3")``; None without a digit."""
    version = regex.search(r"\d", tag)
    return (tag[: version.start()], tag[version.start() :]) if version is not None else None


def _tag_release(tag: str, release: str) -> bool:
    return release_key(tag) == release_key(release)


def _from_frames(runs: list[_Run], frames: Iterable[tuple[str, int]]) -> list[_Run] | None:
    """The runs the traceback's innermost frame in one of their files points at, or None.

    A frame whose line is a run's line picks the runs at that line; else every run in that
    file.
    """
    for file, line in frames:
        shown = "/" + file.replace("\\", "/").lstrip("/")
        in_file = [r for r in runs if shown.endswith("/" + r.path)]
        if in_file:
            at_line = [r for r in in_file if r.line == line]
            return at_line or in_file
    return None


def _spread(runs: list[_Run], versions: Versions) -> tuple[str, ...]:
    """Where the releases raise it, one item per file: ``path:40-41``.

    With several files, each says its releases: ``path:12 (0.2.7 to before 0.10.0)``. One file
    whose sites stop short of the record's last release (or of the newest checked) says the
    releases it was read in there: a message raised from several files over time is mined as
    one record a file, each holding the message's whole range, and the range beside the file
    would say it raised it in releases where another file did.
    """
    files: dict[str, list[_Run]] = {}
    for run in runs:
        files.setdefault(run.path, []).append(run)
    out = []
    for path, in_file in files.items():
        lines = sorted({r.line for r in in_file})
        shown = f"{path}:{lines[0]}" + (f"-{lines[-1]}" if len(lines) > 1 else "")
        if len(files) > 1:
            since, until = in_file[0].since, in_file[-1].until
            span = f"{since} to before {until}" if until else f"{since} on"
            if until is None and versions.last:
                span = since if versions.last == since else f"{since} to {versions.last}"
            shown += f" ({span})"
        elif in_file[-1].since != (versions.last or versions.checked):
            since, latest = in_file[0].since, in_file[-1].since
            shown += f" (read there in {since}" + (f" to {latest})" if latest != since else ")")
        out.append(shown)
    return tuple(out)


def site_for(
    record: Record,
    frames: Iterable[tuple[str, int]] = (),
    *,
    known: Sequence[tuple[str | None, str]] = (),
    fallback: Sequence[tuple[str | None, str]] = (),
) -> Site | None:
    """The site of ``record`` for the release in use; ``None`` when it has no ``versions``.

    The release in use is the first given of ``known`` (a release with its basis, read before
    the traceback: the installed release under the hook, a release the pasted text states),
    else the one the traceback's ``frames`` (``(file, line)``, innermost first) point at, else
    the first given of ``fallback`` (the installed release, for a pasted text); else none, and
    the site is the range.
    """
    versions = record.versions
    if versions is None:
        return None
    base = Site(
        distribution=versions.distribution,
        first=versions.first,
        last=versions.last,
        checked=versions.checked,
    )
    runs = _runs(versions)
    given = [(r, b) for r, b in known if r]
    if given:
        return _at_release(record, base, *given[0])
    picked = _from_frames(runs, frames) if runs else None
    if picked is not None:
        run = picked[0]
        line = run.line if len({r.line for r in picked}) == 1 else None
        return attrs.evolve(
            base,
            release=run.since,
            basis="traceback",
            until=picked[-1].until,
            raises=True,
            file=run.path,
            line=line,
            url=link(record, run.since, run.path, line) if line else None,
        )
    given = [(r, b) for r, b in fallback if r]
    if given:
        return _at_release(record, base, *given[0])
    return attrs.evolve(base, spread=_spread(runs, versions))


def _at_release(record: Record, base: Site, release: str, basis: str) -> Site:
    versions = record.versions
    if versions is None:  # pragma: no cover - site_for checked it
        return base
    raises = _within(versions, release)
    where = versions.site_at(release) if raises is not False else None
    if where is None:
        return attrs.evolve(
            base,
            release=release,
            basis=basis,
            raises=raises,
            spread=_spread(_runs(versions), versions),
        )
    path, _, line = where.rpartition(":")
    number = int(line) if line.isdigit() else None
    return attrs.evolve(
        base,
        release=release,
        basis=basis,
        raises=raises,
        file=path,
        line=number,
        url=link(record, release, path, number) if number else None,
    )
