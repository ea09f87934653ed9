"""Where the miner reads source: an installed distribution, a wheel, an sdist or a folder.

A :class:`Source` gives the files of one release (never installed, built or imported: a wheel
and an sdist are read as archives) with the facts a record needs: the distribution's name
(PEP 503 normalised), its version, and its GitHub repository with the form of its release
tags, so that a record can link to the line at that release.
"""

from __future__ import annotations

import configparser
import email.parser
import importlib.metadata
import io
import os
import re
import sys
import tarfile
import zipfile
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from errkb._attrs import attrs
from errkb.exceptions import UsageError
from errkb.records._repos import REPOS

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

__all__ = ["Source", "normalize", "open_source", "passed_over"]

#: Python source suffixes.
PYTHON = (".py",)

#: Folders passed over: tests, docs and examples raise messages users never meet.
SKIPPED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".nox",
        ".tox",
        ".venv",
        "venv",
        "__pycache__",
        "node_modules",
        "build",
        "tests",
        "test",
        "docs",
        "examples",
        "benchmarks",
        "benches",
    }
)
#: Files of tests, in every language: ``test_x.py``, ``x_test.cc``, ``conftest.py``.
_TEST_FILE = re.compile(r"(?:test_.*|.*_test|conftest)\.\w+")


def passed_over(path: str) -> bool:
    """Whether a file is one users never run, in any language.

    That is a file under a test, docs, example or benchmark folder (:data:`SKIPPED_DIRS`), or
    a test by its name (``test_*``, ``*_test``, ``conftest.py``).

    >>> [passed_over(p) for p in ("pkg/a.py", "tests/a.rs", "pkg/io_test.cc", "test_a.py")]
    [False, True, True, True]
    """
    *folders, name = PurePosixPath(path).parts
    return bool(SKIPPED_DIRS.intersection(folders)) or _TEST_FILE.fullmatch(name) is not None


_GITHUB = re.compile(r"https?://(?:www\.)?github\.com/([\w.-]+)/([\w.-]+?)(?:\.git)?(?:[/#?]|$)")
_SOURCE_LABELS = ("source", "repository", "code", "github", "homepage", "home")
_SDIST = (".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".zip")


def normalize(name: str) -> str:
    """A distribution's name as PEP 503 compares them: ``Hugging_Face.Hub`` -> ``hugging-face-hub``."""
    return re.sub(r"[-_.]+", "-", name).lower()


@attrs.frozen(kw_only=True)
class Source:
    """One release of one distribution, and how to read its files.

    Attributes:
        given: the SOURCE as the user wrote it.
        distribution: the normalised name (``huggingface-hub``).
        version: the release (``None``: unknown).
        repo: the GitHub ``owner/name`` (``None``: unknown).
        tag: the release tag's form, ``{}`` for the version.
        prefix: the folder of the repository that the package paths are relative to (a wheel's
            ``transformers/...`` is the repository's ``src/transformers/...``).
        archive: the kind of thing read: ``installed``, ``wheel``, ``sdist`` or ``folder``.
    """

    given: str
    distribution: str
    version: str | None
    repo: str | None
    tag: str
    prefix: str
    archive: str
    _walk: Callable[[tuple[str, ...]], Iterator[tuple[str, bytes]]] = attrs.field(
        alias="walk", repr=False
    )

    def files(self, suffixes: Iterable[str]) -> Iterator[tuple[str, str]]:
        """Each file whose name ends with one of ``suffixes``: (path with ``/``, text).

        Tests, docs, examples and benchmarks are passed over (:func:`passed_over`); the text is
        decoded as UTF-8 with undecodable bytes replaced (the native readers use this for
        ``.h``, ``.cpp``, ``.rs``).
        """
        for path, data in self._walk(tuple(suffixes)):
            if passed_over(path):
                continue
            yield path, data.decode("utf-8", errors="replace")

    def python_files(self) -> Iterator[tuple[str, str]]:
        """The ``.py`` files of the packages users import, as :meth:`files` gives them.

        When the source has packages, a file counts when its folder holds an ``__init__.py``
        (or it is the top-level ``setup.py``, whose errors users meet at install time): an
        sdist's CI scripts, tools and loose scripts raise messages no user of the package
        meets. A source of loose modules only (no ``__init__.py`` anywhere) is read whole.
        """
        files = list(self.files(PYTHON))
        packages = {str(PurePosixPath(p).parent) for p, _ in files if p.endswith("/__init__.py")}
        if "__init__.py" in {PurePosixPath(p).name for p, _ in files}:
            packages.add(".")  # a package folder given as the source itself
        for path, text in files:
            if not packages or str(PurePosixPath(path).parent) in packages or path == "setup.py":
                yield path, text

    def repo_path(self, path: str) -> str:
        """The file's path in the repository (the package path under :attr:`prefix`)."""
        if self.prefix and self.archive in ("wheel", "installed"):
            return self.prefix + path
        return path

    def github_url(self, path: str, start: int, end: int) -> str | None:
        """The lines at this release on GitHub, when the repository and version are known."""
        if self.repo is None or self.version is None:
            return None
        tag = self.tag.format(self.version)
        lines = f"L{start}" if start == end else f"L{start}-L{end}"
        return f"https://github.com/{self.repo}/blob/{tag}/{self.repo_path(path)}#{lines}"


def open_source(given: str) -> Source:
    """The :class:`Source` named by ``given``: a wheel, an sdist, a folder, or an installed name.

    Raises :class:`~errkb.exceptions.UsageError` when it is none of those.
    """
    path = Path(given)
    if path.is_dir():
        return _folder(given, path)
    if path.is_file():
        if path.name.endswith(".whl"):
            return _wheel(given, path)
        if path.name.endswith(_SDIST):
            return _sdist(given, path)
        raise UsageError(f"{given}: expected a wheel (.whl), an sdist (.tar.gz, .zip) or a folder")
    try:
        dist = importlib.metadata.distribution(given)
    except importlib.metadata.PackageNotFoundError:
        raise UsageError(
            f"{given}: no such file or folder, and no installed distribution of that name"
        ) from None
    return _installed(given, dist)


def _make(
    given: str,
    name: str,
    version: str | None,
    urls: Iterable[tuple[str, str]],
    archive: str,
    walk: Callable[[tuple[str, ...]], Iterator[tuple[str, bytes]]],
) -> Source:
    dist = normalize(name)
    # A distribution errkb.records._repos.REPOS does not list gets its repository from its
    # metadata, tags ``v{}`` and no folder.
    repo, tag, prefix = REPOS.get(dist, (None, "v{}", ""))
    if repo is None:
        repo = _github_repo(urls)
    return Source(
        given=given,
        distribution=dist,
        version=version or None,
        repo=repo,
        tag=tag,
        prefix=prefix,
        archive=archive,
        walk=walk,
    )


def _github_repo(urls: Iterable[tuple[str, str]]) -> str | None:
    """``owner/name`` of the first GitHub URL, preferring one labelled as the source."""
    found = [(label.strip().lower(), m) for label, url in urls if (m := _GITHUB.match(url.strip()))]
    found.sort(key=lambda item: item[0] not in _SOURCE_LABELS)
    if not found:
        return None
    match = found[0][1]
    return f"{match.group(1)}/{match.group(2)}"


def _metadata_urls(meta: Any) -> list[tuple[str, str]]:
    """(label, URL) pairs of core metadata: ``Home-page`` and each ``Project-URL``."""
    urls = [("home", meta.get("Home-page") or "")]
    for entry in meta.get_all("Project-URL") or ():
        label, _, url = entry.partition(",")
        urls.append((label, url))
    return urls


# --- installed distributions ------------------------------------------------------------


def _installed(given: str, dist: importlib.metadata.Distribution) -> Source:
    meta = dist.metadata

    def walk(suffixes: tuple[str, ...]) -> Iterator[tuple[str, bytes]]:
        for file in dist.files or ():
            name = str(file)
            if not name.endswith(suffixes) or name.startswith(".."):
                continue
            try:
                data = Path(str(dist.locate_file(file))).read_bytes()
            except OSError:
                continue
            yield name.replace(os.sep, "/"), data

    return _make(
        given,
        meta["Name"],
        meta["Version"],
        _metadata_urls(meta),
        "installed",
        walk,
    )


# --- wheels -----------------------------------------------------------------------------


def _wheel(given: str, path: Path) -> Source:
    try:
        with zipfile.ZipFile(path) as zf:
            metas = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
            if not metas:
                raise UsageError(f"{given}: a wheel without .dist-info/METADATA")
            meta = email.parser.BytesParser().parsebytes(zf.read(metas[0]))
    except (OSError, zipfile.BadZipFile) as exc:
        raise UsageError(f"{given}: cannot read the wheel ({exc})") from None

    def walk(suffixes: tuple[str, ...]) -> Iterator[tuple[str, bytes]]:
        with zipfile.ZipFile(path) as zf:
            for info in zf.infolist():
                if not info.is_dir() and info.filename.endswith(suffixes):
                    yield info.filename, zf.read(info)

    return _make(given, meta["Name"] or path.name.split("-")[0], meta["Version"],
                 _metadata_urls(meta), "wheel", walk)  # fmt: skip


# --- sdists -----------------------------------------------------------------------------


def _sdist(given: str, path: Path) -> Source:
    """An sdist read as an archive; its paths lose the top folder (``name-1.0/``)."""

    def members() -> Iterator[tuple[str, Callable[[], bytes]]]:
        if path.name.endswith(".zip"):
            with zipfile.ZipFile(path) as zf:
                for info in zf.infolist():
                    if not info.is_dir():
                        yield info.filename, lambda info=info: zf.read(info)  # type: ignore[misc]
            return
        with tarfile.open(path) as tf:
            for member in tf:
                if member.isfile():
                    yield member.name, lambda m=member: _tar_read(tf, m)  # type: ignore[misc]

    def walk(suffixes: tuple[str, ...]) -> Iterator[tuple[str, bytes]]:
        for name, read in members():
            inner = name.partition("/")[2]
            if inner and name.endswith(suffixes):
                yield inner, read()

    meta_files: dict[str, bytes] = {}
    try:
        for member_name, read in members():
            inner = member_name.partition("/")[2]
            if inner in ("PKG-INFO", "pyproject.toml", "setup.cfg"):
                meta_files[inner] = read()
    except (OSError, tarfile.TarError, zipfile.BadZipFile, EOFError) as exc:
        raise UsageError(f"{given}: cannot read the sdist ({exc})") from None
    name, version, urls = _project_metadata(meta_files)
    if name is None:
        stem = path.name
        for suffix in _SDIST:
            stem = stem.removesuffix(suffix)
        stem_name, _, guessed = stem.rpartition("-")
        name, version = stem_name, version or guessed
    return _make(given, name or path.name, version, urls, "sdist", walk)


def _tar_read(tf: tarfile.TarFile, member: tarfile.TarInfo) -> bytes:
    handle = tf.extractfile(member)
    return b"" if handle is None else handle.read()


# --- folders ----------------------------------------------------------------------------


def _folder(given: str, path: Path) -> Source:
    meta_files = {
        name: (path / name).read_bytes()
        for name in ("pyproject.toml", "PKG-INFO", "setup.cfg")
        if (path / name).is_file()
    }
    name, version, urls = _project_metadata(meta_files)

    def walk(suffixes: tuple[str, ...]) -> Iterator[tuple[str, bytes]]:
        for root, dirs, names in os.walk(path):
            dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS and not d.startswith("."))
            for file in sorted(names):
                if file.endswith(suffixes):
                    full = Path(root) / file
                    try:
                        yield full.relative_to(path).as_posix(), full.read_bytes()
                    except OSError:
                        continue

    return _make(given, name or path.resolve().name, version, urls, "folder", walk)


def _project_metadata(
    files: dict[str, bytes],
) -> tuple[str | None, str | None, list[tuple[str, str]]]:
    """Name, version and URLs from pyproject.toml, PKG-INFO and setup.cfg, in that order."""
    name: str | None = None
    version: str | None = None
    urls: list[tuple[str, str]] = []
    if "pyproject.toml" in files and sys.version_info >= (3, 11):
        import tomllib

        try:
            project = tomllib.loads(files["pyproject.toml"].decode("utf-8")).get("project", {})
        except (tomllib.TOMLDecodeError, UnicodeDecodeError):
            project = {}
        name = project.get("name") if isinstance(project.get("name"), str) else None
        if isinstance(project.get("version"), str):
            version = project["version"]
        given_urls = project.get("urls")
        if isinstance(given_urls, dict):
            urls.extend((str(k), str(v)) for k, v in given_urls.items())
    if "PKG-INFO" in files:
        meta = email.parser.BytesParser().parsebytes(files["PKG-INFO"])
        name = name or meta["Name"]
        version = version or meta["Version"]
        urls.extend(_metadata_urls(meta))
    if "setup.cfg" in files:
        parser = configparser.ConfigParser(interpolation=None)
        try:
            parser.read_file(io.StringIO(files["setup.cfg"].decode("utf-8", errors="replace")))
        except configparser.Error:
            pass
        else:
            if parser.has_section("metadata"):
                section = parser["metadata"]
                name = name or section.get("name")
                found = section.get("version")
                if found and not found.startswith(("attr:", "file:")):
                    version = version or found
                urls.append(("home", section.get("url", "")))
                for line in section.get("project_urls", "").splitlines():
                    label, _, url = line.partition("=")
                    urls.append((label, url))
    return name, version, urls
