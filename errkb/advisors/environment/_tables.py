"""The knowledge tables the verdicts judge with: ``errkb/advisors/environment/tables/*.json``.

Nine tables, each row citing where it was read (``source``): the CUDA builds of torch releases
and the GPU architectures each carries code for (``torch_builds.json``), which GPUs code for
one architecture runs on (``code_compatibility.json``), the oldest driver for each CUDA
runtime (``cuda_drivers.json``), the compute capability of GPU models by name
(``gpu_capabilities.json``), and the torch and CUDA that releases of the compiled extensions
were built for (``vllm_builds.json``, ``bitsandbytes_builds.json``, ``xformers_builds.json``,
``flash_attn_builds.json``), and the CUDA library wheels each torch release pins
(``cuda_wheel_pins.json``). They are data, not error records: they live beside the verdicts
that ``errkb doctor`` and the environment advisor share, not under ``records/``, so that the
record index knows nothing of them.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

from errkb._attrs import attrs

__all__ = [
    "INDEX_ROOT",
    "Capability",
    "CodeRule",
    "CudaWheelPin",
    "DriverRow",
    "ExtensionBuildRow",
    "GpuRow",
    "Tables",
    "TorchBuildRow",
    "capability",
    "tables",
]

TABLES = Path(__file__).parent / "tables"

#: The tables of compiled extensions' releases, one row a release.
EXTENSION_TABLES = (
    "vllm_builds.json",
    "bitsandbytes_builds.json",
    "xformers_builds.json",
    "flash_attn_builds.json",
)

#: Where torch's CUDA builds are installed from: ``<root>/cu<XY>``, as torch's own warning for
#: an unsupported GPU prints it (torch-2.13.0 wheel, torch/cuda/__init__.py:387 and :394).
INDEX_ROOT = "https://download.pytorch.org/whl"

#: A compute capability, (major, minor).
Capability = tuple[int, int]


def capability(text: str) -> Capability:
    """``"8.6"`` -> ``(8, 6)``; ``"sm_86"``, ``"compute_90"``, ``"sm_90a"`` -> their numbers.

    Raises ``ValueError`` for anything else.
    """
    if "_" in text:
        digits = text.split("_", 1)[1].rstrip("af")
        if not digits.isdigit() or len(digits) < 2:
            raise ValueError(f"not an architecture: {text!r}")
        return int(digits[:-1]), int(digits[-1])
    major, _, minor = text.partition(".")
    if not (major.isdigit() and minor.isdigit()):
        raise ValueError(f"not a compute capability: {text!r}")
    return int(major), int(minor)


@attrs.frozen(kw_only=True)
class TorchBuildRow:
    """One CUDA build of one torch release, for one machine (``any``: every machine)."""

    torch: str
    cuda: str
    machine: str
    capabilities: tuple[Capability, ...]
    source: str

    @property
    def index_url(self) -> str:
        """The package index this build is installed from."""
        return f"{INDEX_ROOT}/cu{self.cuda.replace('.', '')}"


@attrs.frozen(kw_only=True)
class CodeRule:
    """Which GPUs code compiled for ``code`` runs on.

    Within ``code``'s major, from its minor up, less ``excluded``; or exactly ``only``.
    """

    code: Capability
    excluded: tuple[Capability, ...] = ()
    only: tuple[Capability, ...] = ()
    source: str = ""

    def runs_on(self, device: Capability) -> bool:
        """True when code for this architecture runs on a GPU of capability ``device``."""
        if self.only:
            return device in self.only
        return (
            device[0] == self.code[0] and device[1] >= self.code[1] and device not in self.excluded
        )


@attrs.frozen(kw_only=True)
class DriverRow:
    """The oldest driver for a CUDA runtime (``cuda`` is a major, or major.minor before 11)."""

    cuda: str
    minimum: str | None
    linux: str | None
    windows: str | None
    source: str

    def needed(self, system: str | None) -> str | None:
        """The oldest driver on ``system`` (``linux``, ``windows``; ``None``: not known).

        The exact version where the table gives one for that system, else the branch that
        holds for every system (``580``); ``None`` when the row says neither.
        """
        exact = {"linux": self.linux, "windows": self.windows}.get(system or "")
        return exact or self.minimum


@attrs.frozen(kw_only=True)
class GpuRow:
    """A GPU model's name as NVIDIA lists it, and its compute capability."""

    name: str
    capability: Capability
    source: str


@attrs.frozen(kw_only=True)
class ExtensionBuildRow:
    """One release of a compiled extension: the torch it requires and the CUDA it was built for.

    ``torch`` is the requirement's specifier (``==2.4.0``, ``<3,>=2.0``; ``""``: none stated);
    ``cuda`` the CUDA releases its binaries were built for (empty: not stated where read);
    ``platform`` the wheel's platform tag where one wheel was read (``""``: a source archive);
    ``torch_builds`` the torch releases its binaries were compiled against, where that was read
    (flash-attn publishes one wheel per torch release; empty: not read).
    """

    distribution: str
    version: str
    torch: str
    cuda: tuple[str, ...]
    platform: str
    source: str
    torch_builds: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class CudaWheelPin:
    """A CUDA library wheel a torch release's Linux x86_64 wheel pins (``==version``)."""

    torch: str
    distribution: str
    version: str
    source: str


@attrs.frozen(kw_only=True)
class Tables:
    """All the tables."""

    torch_builds: tuple[TorchBuildRow, ...]
    code_rules: tuple[CodeRule, ...]
    drivers: tuple[DriverRow, ...]
    gpus: tuple[GpuRow, ...]
    extension_builds: tuple[ExtensionBuildRow, ...] = ()
    cuda_wheel_pins: tuple[CudaWheelPin, ...] = ()

    def code_rule(self, code: Capability) -> CodeRule:
        """The rule for ``code``; for an architecture torch does not list, its major onwards."""
        for rule in self.code_rules:
            if rule.code == code:
                return rule
        return CodeRule(code=code, source="no row: the same major, this minor or newer")

    def driver_row(self, cuda: str) -> DriverRow | None:
        """The row for runtime ``cuda`` (``12.8`` -> the CUDA 12 row; ``10.2`` -> its own)."""
        major = cuda.split(".", maxsplit=1)[0]
        by_name = {row.cuda: row for row in self.drivers}
        return by_name.get(major) or by_name.get(".".join(cuda.split(".")[:2]))

    def gpu_capability(self, name: str) -> GpuRow | None:
        """The row whose model name NVML's ``name`` starts with, the longest that does.

        NVML says ``NVIDIA GeForce RTX 4090`` or ``NVIDIA H100 80GB HBM3``; NVIDIA's pages
        ``GeForce RTX 4090`` and ``NVIDIA H100``. A name must end where a word ends:
        ``NVIDIA A10G`` is not ``NVIDIA A10``.
        """
        wanted = " ".join(name.split()).lower()
        best: GpuRow | None = None
        for row in self.gpus:
            for form in {row.name.lower(), "nvidia " + row.name.lower()}:
                ends = wanted.startswith(form) and not wanted[len(form) : len(form) + 1].isalnum()
                if ends and (best is None or len(row.name) > len(best.name)):
                    best = row
        return best


def _rows(name: str) -> list[dict[str, object]]:
    data = json.loads((TABLES / name).read_text(encoding="utf-8"))
    rows: list[dict[str, object]] = data["rows"]
    return rows


@functools.cache
def tables() -> Tables:
    """The tables shipped with errkb, read once."""
    return Tables(
        torch_builds=tuple(
            TorchBuildRow(
                torch=str(row["torch"]),
                cuda=str(row["cuda"]),
                machine=str(row["machine"]),
                capabilities=tuple(capability(str(c)) for c in _list(row["capabilities"])),
                source=str(row["source"]),
            )
            for row in _rows("torch_builds.json")
        ),
        code_rules=tuple(
            CodeRule(
                code=capability(str(row["code"])),
                excluded=tuple(capability(str(c)) for c in _list(row.get("except", []))),
                only=tuple(capability(str(c)) for c in _list(row.get("only", []))),
                source=str(row["source"]),
            )
            for row in _rows("code_compatibility.json")
        ),
        drivers=tuple(
            DriverRow(
                cuda=str(row["cuda"]),
                minimum=_text(row.get("minimum")),
                linux=_text(row.get("linux")),
                windows=_text(row.get("windows")),
                source=str(row["source"]),
            )
            for row in _rows("cuda_drivers.json")
        ),
        gpus=tuple(
            GpuRow(
                name=str(row["name"]),
                capability=capability(str(row["capability"])),
                source=str(row["source"]),
            )
            for row in _rows("gpu_capabilities.json")
        ),
        extension_builds=tuple(
            ExtensionBuildRow(
                distribution=str(row["distribution"]),
                version=str(row["version"]),
                torch=str(row["torch"]),
                cuda=tuple(str(c) for c in _list(row["cuda"])),
                platform=str(row.get("platform", "")),
                source=str(row["source"]),
                torch_builds=tuple(str(t) for t in _list(row.get("torch_builds", []))),
            )
            for name in EXTENSION_TABLES
            for row in _rows(name)
        ),
        cuda_wheel_pins=tuple(
            CudaWheelPin(
                torch=str(row["torch"]),
                distribution=str(row["distribution"]),
                version=str(row["version"]),
                source=str(row["source"]),
            )
            for row in _rows("cuda_wheel_pins.json")
        ),
    )


def _list(value: object) -> list[object]:
    return list(value) if isinstance(value, list) else []


def _text(value: object) -> str | None:
    return None if value is None else str(value)
