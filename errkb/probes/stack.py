"""The stack probe: the installed distributions, what each requires, and what the set breaks.

The metadata folders on the path (``*.dist-info``, ``*.egg-info``) are read as files
(:mod:`errkb._dists` finds them): nothing is imported from a distribution and pip is not run.
Each distribution's ``Requires-Dist`` lines are checked against the installed set as ``pip
check`` checks them: markers evaluated for this interpreter with no extra, a requirement
missing or installed at a version its specifier does not contain (pre-releases allowed). The
requirement strings are read with ``packaging``, which the stack brings (transformers,
huggingface-hub, accelerate require it); without it the check is skipped and says why.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from errkb._attrs import attrs
from errkb._dists import metadata_folders, normalize

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from packaging.requirements import Requirement

__all__ = [
    "EXTENSION_DISTRIBUTIONS",
    "STACK",
    "Broken",
    "Distribution",
    "StackReading",
    "read_distributions",
    "read_stack",
]

#: The distributions of the stack with compiled extensions (tried by
#: :mod:`errkb.probes.extensions`), in the order they are tried.
EXTENSION_DISTRIBUTIONS = (
    "vllm",
    "flash-attn",
    "xformers",
    "bitsandbytes",
    "apex",
    "deepspeed",
    "torchvision",
    "torchaudio",
)

#: The distributions shown by name (those installed): the ML and serving stack. Every other
#: installed distribution is still checked for broken requirements.
STACK = (
    "torch",
    "triton",
    "numpy",
    "transformers",
    "accelerate",
    "peft",
    "safetensors",
    "tokenizers",
    "huggingface-hub",
    *EXTENSION_DISTRIBUTIONS,
    "nvidia-nccl-cu12",
    "nvidia-cudnn-cu12",
    "nvidia-cuda-runtime-cu12",
    "nvidia-cuda-nvrtc-cu12",
    "nvidia-cublas-cu12",
    "nvidia-cufft-cu12",
    "nvidia-nccl-cu13",
    "nvidia-cuda-runtime-cu13",
)


@attrs.frozen(kw_only=True)
class Distribution:
    """One installed distribution: its name and version as its metadata spells them."""

    name: str
    version: str
    folder: str
    requires: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class Broken:
    """A requirement the installed set does not satisfy (what ``pip check`` would print).

    ``installed`` is the version present, ``None`` when the distribution is missing.
    """

    distribution: str
    version: str
    requirement: str
    required: str
    installed: str | None


@attrs.frozen(kw_only=True)
class StackReading:
    """The stack's installed distributions, the broken requirements of all, and a note.

    ``note`` says why the requirements were not checked, when they were not.
    """

    distributions: tuple[Distribution, ...]
    checked: int
    broken: tuple[Broken, ...]
    note: str | None = None
    source: str = ""


def read_distributions(paths: Sequence[str] | None = None) -> dict[str, Distribution]:
    """Normalized name -> the first distribution of that name on ``paths`` (``sys.path``)."""
    found: dict[str, Distribution] = {}
    for entry in sys.path if paths is None else paths:
        for name, folder in metadata_folders(entry or "."):
            if name not in found:
                dist = _read(Path(folder))
                if dist is not None:
                    found[name] = dist
    return found


def read_stack(paths: Sequence[str] | None = None) -> StackReading:
    """The stack's distributions and every broken requirement of the installed set."""
    installed = read_distributions(paths)
    stack = tuple(installed[n] for n in map(normalize, STACK) if n in installed)
    source = f"the metadata folders of {len(installed)} distributions on the path"
    try:
        broken = tuple(_broken(installed))
    except ImportError:
        return StackReading(
            distributions=stack,
            checked=0,
            broken=(),
            note="requirements not checked: install packaging to check them",
            source=source,
        )
    return StackReading(distributions=stack, checked=len(installed), broken=broken, source=source)


def _read(folder: Path) -> Distribution | None:
    """A distribution from its metadata folder (``None``: no name or version in it)."""
    headers: dict[str, list[str]] = {}
    for file in ("METADATA", "PKG-INFO"):
        try:
            text = (folder / file).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            if not line.strip():
                break  # the headers end at the first empty line
            key, sep, value = line.partition(":")
            if sep and not line[0].isspace():
                headers.setdefault(key.strip().lower(), []).append(value.strip())
        break
    name, version = headers.get("name", [""])[0], headers.get("version", [""])[0]
    if not name or not version:
        return None
    requires = headers.get("requires-dist", [])
    if folder.name.endswith(".egg-info"):
        requires = list(_egg_requires(folder))
    return Distribution(name=name, version=version, folder=str(folder), requires=tuple(requires))


def _egg_requires(folder: Path) -> Iterable[str]:
    """An egg-info's ``requires.txt``: the lines before any section, and ``[:marker]`` ones."""
    try:
        text = (folder / "requires.txt").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return
    marker: str | None = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith("["):
            section = line.strip("[]")
            extra, _, condition = section.partition(":")
            marker = None if extra else condition  # an extra's requirements are not checked
            continue
        if marker is None:
            continue
        yield f"{line}; {marker}" if marker else line


def _broken(installed: dict[str, Distribution]) -> Iterable[Broken]:
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.version import InvalidVersion, Version

    for dist in installed.values():
        for text in dist.requires:
            try:
                requirement = Requirement(text)
            except InvalidRequirement:
                continue
            if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
                continue
            present = installed.get(normalize(requirement.name))
            if present is None:
                yield Broken(
                    distribution=dist.name,
                    version=dist.version,
                    requirement=_unmarked(requirement),
                    required=requirement.name,
                    installed=None,
                )
                continue
            try:
                satisfied = requirement.specifier.contains(
                    Version(present.version), prereleases=True
                )
            except InvalidVersion:
                continue
            if not satisfied:
                yield Broken(
                    distribution=dist.name,
                    version=dist.version,
                    requirement=_unmarked(requirement),
                    required=requirement.name,
                    installed=present.version,
                )


def _unmarked(requirement: Requirement) -> str:
    """The requirement as ``pip install`` takes it, without its environment marker."""
    return str(requirement).partition(";")[0].strip()
