"""Automation for errkb: tests, lint, types, records, docs, ChatTTS's engine and benchmarks.

`nox` alone runs what CI runs (every session but `bench`, `mine`, `releases` and `audit`).
Dependencies come from pyproject.toml's dependency groups, never repeated here.
"""

from __future__ import annotations

import os
from pathlib import Path

import nox

nox.options.default_venv_backend = "venv"
nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["tests", "lint", "typecheck", "records", "docs", "chattts", "browser"]

PYPROJECT = nox.project.load_toml("pyproject.toml")
PYTHON = "3.11"


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Run the test suite against the installed package (not the source tree).

    The released archives tests read (tests/archives.toml) are downloaded into .mine-cache/
    first, once, each checked against its pinned sha256.
    """
    import tomllib

    session.install(*nox.project.dependency_groups(PYPROJECT, "test"))
    session.install(".")
    cache = Path(".mine-cache")
    cache.mkdir(exist_ok=True)
    for pin in tomllib.loads(Path("tests/archives.toml").read_text(encoding="utf-8"))["archive"]:
        _download(session, cache, pin)
    session.run(
        "pytest", *session.posargs, env={"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    )


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """Check style and formatting with ruff, and errkb's import layers with import-linter."""
    session.install(*nox.project.dependency_groups(PYPROJECT, "lint"))
    session.run("ruff", "check", "errkb", "tests", "noxfile.py")
    session.run("ruff", "format", "--check", "errkb", "tests", "noxfile.py")
    # lint-imports reads errkb from the source tree (root_package in pyproject.toml).
    session.run("lint-imports", env={"PYTHONPATH": "."})


@nox.session(python=PYTHON)
def typecheck(session: nox.Session) -> None:
    """Type-check errkb/ with mypy in strict mode."""
    session.install(*nox.project.dependency_groups(PYPROJECT, "typecheck"))
    session.install(".")
    session.run("mypy")


@nox.session(python=PYTHON)
def records(session: nox.Session) -> None:
    """Validate every record: schema, regexes, examples, counterexamples and ranking; then
    write the mined folder's index (its code stamp may have changed), then the hand-written
    records' index and compiled patterns (records/packs.index, records/patterns.compiled, which
    holds the mined twins' too), and errkb's own patterns compiled (errkb/_own_patterns.compiled);
    tests check they hold the patterns they should. A fixed hash seed: regex's compiler orders
    some of its code by hashes. (Their bytes still differ from build to build where it orders
    by objects' identities: the same patterns, compiled to code that does the same.)"""
    session.install(".[serve]", "pytest")  # so that every errkb module imports: its patterns
    session.run("errkb", "validate", "--published", "records/PUBLISHED", "records")
    session.run(
        "python", "-c",
        "from pathlib import Path; "
        "from errkb.packs import write_folder_index, write_records_index; "
        "from errkb._patterns import write_own_compiled; "
        "write_folder_index(Path('records/mined')); write_records_index(Path('records')); "
        "write_own_compiled(Path('errkb/_own_patterns.compiled'))",
        env={"PYTHONHASHSEED": "0"},
    )  # fmt: skip


@nox.session(python=PYTHON)
def docs(session: nox.Session) -> None:
    """Check the error index in docs/errors (`-- --write` regenerates it), then build the site."""
    session.install(*nox.project.dependency_groups(PYPROJECT, "docs"))
    session.install(".")
    mode = [] if "--write" in session.posargs else ["--check"]
    session.run("python", "-m", "errkb._docgen", *mode, "docs/errors")
    session.run("mkdocs", "build", "--strict", env={"NO_MKDOCS_2_WARNING": "1"})


# Default: about a minute on two cores, CPU torch only, every package from the registry.
@nox.session(python=PYTHON)
def chattts(session: nox.Session) -> None:
    """Run ChatTTS 0.2.5's vendored vLLM engine on CPU torch: its KV-cache error, errkb's fix."""
    session.install("--no-deps", *nox.project.dependency_groups(PYPROJECT, "chattts-engine"))
    session.install(*nox.project.dependency_groups(PYPROJECT, "chattts"))
    session.install(".")
    session.run(
        "pytest",
        "tests/chattts",
        *session.posargs,
        env={"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
    )


# Browsers come from Debian (.ci/run installs them): selenium's driver manager and
# `playwright install` download theirs, which cannot work offline.
BROWSER = (Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver"))


@nox.session(python=PYTHON)
def browser(session: nox.Session) -> None:
    """Drive the support console page in headless Chromium; screenshots go to build/."""
    if missing := [str(p) for p in BROWSER if not p.exists()]:
        why = f"no {' or '.join(missing)}: apt-get install chromium chromium-driver"
        if os.environ.get("CI", "").lower() == "true":
            session.error(f"CI=true and {why}")
        session.warn(f"*** SKIPPING the browser tests: {why} ***")
        session.skip(why)
    session.install(*nox.project.dependency_groups(PYPROJECT, "browser"))
    session.install(".[serve]")
    session.run(
        "pytest",
        "tests/browser",
        *session.posargs,
        env={"ERRKB_SCREENSHOTS": "build/console-screenshots"},
    )


@nox.session(python=PYTHON, default=False)
def bench(session: nox.Session) -> None:
    """Run the benchmarks, each beside its baseline; writes bench-results/ (not in CI)."""
    session.install(*nox.project.dependency_groups(PYPROJECT, "test"))
    session.install(".")
    session.run("python", "benchmarks/run.py", *session.posargs)


# Python 3.12: the newest releases use its f-string syntax (PEP 701), which 3.11 cannot parse.
@nox.session(python="3.12", default=False)
def mine(session: nox.Session) -> None:
    """Rebuild the shipped mined packs (records/mined/) from the pinned list of releases.

    Each file of records/mined/sources.toml (the mined releases) and releases.toml (every other
    release in their range, read only for exact first and last releases) is downloaded once
    into .mine-cache/ and checked against its sha256; `errkb mine` reads all releases of a
    distribution together (archives, never installed or built) and writes
    records/mined/<pack>.jsonl and its release list, without source excerpts (no
    upstream code is shipped: each record links to its line at the tag), with the records of
    version skew where the list says `history = true`. Posargs name the packs to rebuild (all
    by default); then the folder's one index, records/mined/packs.index, and its listing. Not
    part of CI: it downloads about 5 GB.
    """
    import tomllib

    session.install(".[mine]", "packaging")
    listing = tomllib.loads(Path("records/mined/sources.toml").read_text(encoding="utf-8"))
    others = tomllib.loads(Path("records/mined/releases.toml").read_text(encoding="utf-8"))
    between = {d["pack"]: d.get("release", []) for d in others["distribution"]}
    cache = Path(".mine-cache")
    cache.mkdir(exist_ok=True)
    wanted = set(session.posargs)
    for dist in listing["distribution"]:
        if wanted and dist["pack"] not in wanted:
            continue
        files = [str(_download(session, cache, pin)) for pin in dist["file"]]
        bounds, lines = [], [pin["version"] for pin in dist["file"]]
        for release in between.get(dist["pack"], []):
            if "missing" in release:
                lines.append(f"{release['version']} # {release['missing']}")
            else:
                bounds.append(str(_download(session, cache, release)))
                lines.append(release["version"] + (" yanked" if release.get("yanked") else ""))
        listed = cache / f"{dist['pack']}.releases.txt"
        listed.write_text("\n".join(lines) + "\n", encoding="utf-8")
        out = f"records/mined/{dist['pack']}.jsonl"
        history = ["--history"] if dist.get("history") else []
        if "max-classes" in dist:  # what the installed-size budget allows (docs/mining.md)
            history += ["--max-classes", str(dist["max-classes"])]
        summary = f"records/mined/{dist['pack']}.summary"
        session.run(
            "errkb", "mine", *files, *history, "--excerpt-lines", "0",
            "--output", out, "--summary", summary, "--releases", str(listed),
            "--bounds-cache", str(cache / "bounds"),
            *(["--bounds", *bounds] if bounds else []),
        )  # fmt: skip
    # One index for every pack of the folder (and its listing): a lookup costs the same
    # whatever the number of packs (errkb/packs.py, docs/performance.md).
    session.run(
        "python", "-c",
        "from pathlib import Path; from errkb.packs import write_folder_index; "
        "write_folder_index(Path('records/mined'))",
    )  # fmt: skip


def _download(session: nox.Session, cache: Path, pin: dict[str, str]) -> Path:
    """The pinned file, downloaded into the cache once and checked against its sha256."""
    import hashlib
    import urllib.request

    path = cache / pin["url"].rsplit("/", 1)[1]
    if not path.is_file() or hashlib.sha256(path.read_bytes()).hexdigest() != pin["sha256"]:
        session.log(f"downloading {pin['url']}")
        with urllib.request.urlopen(pin["url"], timeout=300) as response:
            data = response.read()
        if hashlib.sha256(data).hexdigest() != pin["sha256"]:
            session.error(f"{path.name}: sha256 differs from the pinned one")
        path.write_bytes(data)
    return path


@nox.session(python=PYTHON, default=False)
def audit(session: nox.Session) -> None:
    """Re-check a fixed-seed sample of the mined packs against the pinned archives.

    Every archive of records/mined/sources.toml and releases.toml that .mine-cache/ lacks is
    downloaded and checked against its sha256 (about 5 GB the first time); then
    `python -m errkb.mine._audit` checks each sampled record's site, template, first and last
    release, skew boundary, pins and condition by reading the archives itself, prints the
    failures, writes them to build/audit.json and the table into docs/mining.md ("The
    audit"). Posargs go to the module (`-- --only vllm --per-pack 20`). Not part of CI.
    """
    import tomllib

    session.install(".", "packaging")
    cache = Path(".mine-cache")
    cache.mkdir(exist_ok=True)
    for name in ("sources.toml", "releases.toml"):
        listing = tomllib.loads(Path("records/mined", name).read_text(encoding="utf-8"))
        for dist in listing["distribution"]:
            for pin in [*dist.get("file", []), *dist.get("release", [])]:
                if "url" in pin:
                    _download(session, cache, pin)
    Path("build").mkdir(exist_ok=True)
    session.run(
        "python", "-m", "errkb.mine._audit", "--packs", "records/mined", "--cache", str(cache),
        "--write-docs", "docs/mining.md", "--json", "build/audit.json", *session.posargs,
    )  # fmt: skip


@nox.session(python=PYTHON, default=False)
def releases(session: nox.Session) -> None:
    """Write records/mined/releases.toml: every release between the mined ones, pinned.

    For each distribution of sources.toml, the package index's JSON API lists its releases;
    every final release (post-releases too, no pre- or dev releases) from the oldest mined to
    the newest is kept, with one archive of the same kind as the mined ones (an sdist where
    those are sdists; else a py3-none-any wheel, else torch's macOS arm64 wheel for CPython
    3.11, else the smallest wheel), pinned by URL and sha256. A release with no such archive is
    listed with why. Yanked releases are read too (users still have them) and marked.
    """
    import json
    import re
    import urllib.request

    import tomllib

    session.install("packaging")
    from packaging.version import InvalidVersion, Version

    listing = tomllib.loads(Path("records/mined/sources.toml").read_text(encoding="utf-8"))
    out = [
        "# Every release between the oldest and the newest mined release of each distribution of",
        "# sources.toml, written by `nox -s releases` from the package index's JSON API. `nox -s mine`",
        "# reads each one for the records it raises (not for sites), so that a record's first and",
        "# last releases are exact; a release with no archive of the kind read says why.",
    ]
    for dist in listing["distribution"]:
        pinned = {pin["version"] for pin in dist["file"]}
        names = [pin["url"].rsplit("/", 1)[1] for pin in dist["file"]]
        sdists = all(not n.endswith(".whl") for n in names)
        url = f"https://pypi.org/pypi/{dist['name']}/json"
        with urllib.request.urlopen(url, timeout=60) as response:
            index = json.load(response)
        known = sorted(Version(v) for v in pinned)
        found = []
        for text, files in index["releases"].items():
            try:
                version = Version(text)
            except InvalidVersion:
                continue
            if version.is_prerelease or version.is_devrelease or text in pinned:
                continue
            if known[0] <= version <= known[-1]:
                found.append((version, text, files))
        out += ["", "[[distribution]]", f'pack = "{dist["pack"]}"']
        for _, text, files in sorted(found):
            out += ["[[distribution.release]]", f'version = "{text}"']
            chosen = _archive(files, sdists=sdists)
            if chosen is None:
                kind = "sdist" if sdists else "wheel"
                out.append(f'missing = "no {kind} on the package index"')
                continue
            # The index may give a mirror's relative address: the file's canonical one is the
            # same blake2b path on the package host.
            where = re.search(r"[0-9a-f]{2}/[0-9a-f]{2}/[0-9a-f]{60}/[^/]+$", chosen["url"])
            out += [
                f'url = "https://files.pythonhosted.org/packages/{where.group(0)}"',
                f'sha256 = "{chosen["digests"]["sha256"]}"',
                f"size = {chosen['size']}",
            ]
            if all(f.get("yanked") for f in files):
                out.append("yanked = true")
    Path("records/mined/releases.toml").write_text("\n".join(out) + "\n", encoding="utf-8")


def _archive(files: list[dict], *, sdists: bool) -> dict | None:
    """The one archive of a release that is read: see `releases`."""
    if sdists:
        return next((f for f in files if f["packagetype"] == "sdist"), None)
    wheels = [f for f in files if f["filename"].endswith(".whl")]
    for test in (
        lambda n: n.endswith("-py3-none-any.whl"),
        lambda n: "-cp311-" in n and "macosx" in n and n.endswith("_arm64.whl"),
    ):
        if chosen := next((f for f in wheels if test(f["filename"])), None):
            return chosen
    return min(wheels, key=lambda f: f["size"], default=None)
