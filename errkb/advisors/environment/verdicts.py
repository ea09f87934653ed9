"""The doctor's verdicts: what the facts of an environment say is broken, and the fix for it.

Each check is a function from the environment and the knowledge tables to verdicts, and knows
one thing: the GPU's architecture against torch's build, the driver against torch's CUDA
runtime, a CPU-only torch on a machine with a GPU, requirements the installed set breaks, a
compiled extension that does not load, bitsandbytes' CPU library where there is CUDA to use,
a small ``/dev/shm`` in a container. A command is
computed for this machine from the facts and the tables, and only shown.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from errkb.advisors.environment._model import Verdict
from errkb.advisors.environment._tables import Capability, TorchBuildRow, capability, tables

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from errkb.advisors.environment._tables import ExtensionBuildRow, Tables
    from errkb.probes.environment import Environment
    from errkb.probes.extensions import Extension
    from errkb.probes.gpu import NvmlReading
    from errkb.probes.stack import Broken

__all__ = [
    "CHECKS",
    "SHM_MINIMUM",
    "best_build",
    "bitsandbytes_release",
    "bnb_cpu_library",
    "driver_runs",
    "extension_verdict",
    "install_torch_command",
    "judge",
    "machine_of",
    "needed_driver",
    "rebuild_command",
    "system_of",
]

#: Below this, ``/dev/shm`` in a container is too small for DataLoader workers and NCCL's
#: shared-memory transport (Docker gives 64 MiB unless told otherwise).
SHM_MINIMUM = 1 << 30

_GIB = 1 << 30


def judge(env: Environment, known: Tables | None = None) -> tuple[Verdict, ...]:
    """Every verdict on ``env``, check by check (:data:`CHECKS`), with the shipped tables."""
    known = known or tables()
    return tuple(v for check in CHECKS for v in check(env, known))


# -- the GPU, the driver and torch's build -------------------------------------------------


def machine_of(env: Environment) -> str:
    """``aarch64`` or ``x86_64``: the machine the table's builds are chosen for."""
    name = env.system.machine.lower()
    return "aarch64" if name in ("aarch64", "arm64") else "x86_64"


def _base(version: str) -> str:
    return version.split("+", 1)[0]


def _cuda_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split(".") if p.isdigit())


def _driver_cuda(nvml: NvmlReading | None) -> tuple[int, int] | None:
    """The newest CUDA the driver supports, from NVML's encoding (12020 -> (12, 2))."""
    if nvml is None or not nvml.cuda_driver_version:
        return None
    return nvml.cuda_driver_version // 1000, nvml.cuda_driver_version % 1000 // 10


def system_of(env: Environment) -> str | None:
    """``linux`` or ``windows``: whose driver minimums apply here; ``None`` when not known.

    Under WSL the driver is the Windows one (NVML reports the Windows driver's version), so a
    Linux whose platform names Microsoft's kernel counts as Windows.
    """
    name = env.system.os.lower()
    if "windows" in name or "microsoft" in name or "wsl" in name:
        return "windows"
    linux = ("linux", "ubuntu", "debian", "centos", "red hat", "rocky", "fedora", "suse", "arch")
    return "linux" if any(word in name for word in linux) else None


def _version(text: str) -> tuple[int, ...]:
    """``"535.183.01"`` -> ``(535, 183, 1)``; ``()`` for no version."""
    parts = []
    for part in text.strip().split("."):
        if not part.isdigit():
            break
        parts.append(int(part))
    return tuple(parts)


def driver_runs(known: Tables, cuda: str, env: Environment) -> bool | None:
    """True when this machine's driver runs CUDA runtime ``cuda``; ``None``: not known.

    The driver's version against the table's minimum for this operating system (the exact
    version where an NVIDIA page gives one, else the branch): the minimum under minor version
    compatibility, below which the runtime cannot start at all. Without the driver's version,
    the newest CUDA it reports: from CUDA 11 on, the same major suffices.
    """
    row, nvml = known.driver_row(cuda), env.nvml
    if nvml is None:
        return None
    version = _version(nvml.driver_version or "")
    needed = row.needed(system_of(env)) if row is not None else None
    if version and needed:
        return version >= _version(needed)
    driver_cuda = _driver_cuda(nvml)
    if driver_cuda is None:
        return None
    runtime = _cuda_tuple(cuda)
    return driver_cuda[0] >= runtime[0] if runtime[0] >= 11 else driver_cuda >= runtime[:2]


def _support(archs: Sequence[str], device: Capability, known: Tables) -> str:
    """``yes`` (code for this GPU), ``ptx`` (only PTX, compiled at first use), or ``no``."""
    ptx = False
    for arch in archs:
        try:
            code = capability(arch)
        except ValueError:
            continue
        if arch.startswith("compute_"):
            ptx = ptx or code <= device
        elif known.code_rule(code).runs_on(device):
            return "yes"
    return "ptx" if ptx else "no"


def _builds_for(
    known: Tables, machine: str, device: Capability | None, version: str | None
) -> list[TorchBuildRow]:
    """The table's builds of torch ``version`` (any release when None) for ``device``.

    ``device`` ``None``: the GPU is not known, every build is a candidate.
    """
    return [
        row
        for row in known.torch_builds
        if row.machine in (machine, "any")
        and (version is None or row.torch == version)
        and (device is None or any(known.code_rule(c).runs_on(device) for c in row.capabilities))
    ]


def best_build(
    known: Tables, env: Environment, device: Capability | None, version: str | None
) -> TorchBuildRow | None:
    """The build to install for ``device`` and this driver: of ``version``, else the newest.

    ``device`` ``None``: the GPU is not known (a pasted message that names only the driver).

    Among the builds the driver runs, the newest CUDA the driver fully supports; else the
    oldest CUDA it runs through minor version compatibility.
    """
    driver_cuda = _driver_cuda(env.nvml)
    for wanted in (version, None) if version is not None else (None,):
        rows = [
            r
            for r in _builds_for(known, machine_of(env), device, wanted)
            if driver_runs(known, r.cuda, env) is not False
        ]
        if wanted is None and rows:
            newest = max(_release(r.torch) for r in rows)
            rows = [r for r in rows if _release(r.torch) == newest]
        if not rows:
            continue
        full = [r for r in rows if driver_cuda is None or _cuda_tuple(r.cuda) <= driver_cuda]
        if full:
            return max(full, key=lambda r: _cuda_tuple(r.cuda))
        return min(rows, key=lambda r: _cuda_tuple(r.cuda))
    return None


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in _base(version).split(".") if p.isdigit())


def install_torch_command(env: Environment, row: TorchBuildRow) -> str:
    """``pip install`` of torch ``row`` and of the installed torchvision/torchaudio with it.

    ``--force-reinstall``: the same version of another build satisfies ``torch==X`` already,
    and pip would keep the installed one.
    """
    names = [f"torch=={row.torch}"]
    if _base(env.torch.version or "") == row.torch:
        installed = {d.name.lower(): d.version for d in env.stack.distributions}
        names += [
            f"{name}=={_base(installed[name])}"
            for name in ("torchvision", "torchaudio")
            if name in installed
        ]
    return f"pip install --force-reinstall {' '.join(names)} --index-url {row.index_url}"


def _check_no_gpu(env: Environment, known: Tables) -> Iterable[Verdict]:  # noqa: ARG001
    if env.nvml is None:
        yield Verdict(
            code="no-gpu",
            severity="note",
            title="No NVIDIA GPU: the GPU checks were skipped",
            why=f"NVML, the NVIDIA driver's library, cannot be read here ({env.nvml_error}).",
        )
    elif not env.nvml.devices:
        visible = dict(env.system.variables).get("CUDA_VISIBLE_DEVICES")
        hidden = f" (CUDA_VISIBLE_DEVICES={visible!r})" if visible is not None else ""
        yield Verdict(
            code="no-gpu",
            severity="note",
            title="The driver shows no GPU to this process",
            why=f"NVML answers but lists no visible device{hidden}.",
        )


def _check_torch(env: Environment, known: Tables) -> Iterable[Verdict]:  # noqa: ARG001
    torch = env.torch
    if not torch.installed:
        yield Verdict(
            code="no-torch",
            severity="note",
            title="torch is not installed: its checks were skipped",
            why="A child interpreter could not import torch (no module named 'torch').",
        )
    elif torch.error:
        yield Verdict(
            code="torch-import-fails",
            severity="broken",
            title="torch does not import",
            why=f"Importing torch in a child interpreter failed: {torch.error}",
        )


def _check_cpu_torch(env: Environment, known: Tables) -> Iterable[Verdict]:
    torch = env.torch
    if not torch.cpu_only:
        return
    if env.nvml is None or not env.nvml.devices:
        yield Verdict(
            code="cpu-torch",
            severity="note",
            title=f"torch {torch.version} is a CPU-only build, and there is no GPU to use",
            why="torch.version.cuda is None; on a machine without an NVIDIA GPU that is the "
            "build to have.",
        )
        return
    device = env.nvml.devices[0]
    row = (
        best_build(known, env, device.capability, _base(torch.version or ""))
        if (device.capability)
        else None
    )
    yield Verdict(
        code="cpu-torch-with-gpu",
        severity="broken",
        title=f"torch {torch.version} is a CPU-only build, on a machine with {device.name}",
        why="torch.version.cuda is None: this build has no CUDA code, so torch.cuda is not "
        "available and code that asks for 'cuda' fails (Torch not compiled with CUDA enabled).",
        fix=_fix_for(row, device.capability),
        commands=(install_torch_command(env, row),) if row else (),
        sources=(row.source,) if row else (),
    )


def _fix_for(row: TorchBuildRow | None, device: Capability | None) -> str:
    if row is None:
        cc = f" {device[0]}.{device[1]}" if device else ""
        return f"errkb's tables hold no torch build for compute capability{cc} on this machine."
    return (
        f"Install torch {row.torch} built for CUDA {row.cuda}, which carries code for this GPU "
        f"(from {row.index_url})."
    )


def _check_arch(env: Environment, known: Tables) -> Iterable[Verdict]:
    torch = env.torch
    if env.nvml is None or torch.hip or not torch.archs:  # archs: a CUDA build's, read or quoted
        return
    for device in env.nvml.devices:
        cap = device.capability
        source = "NVML"
        if cap is None:
            row = known.gpu_capability(device.name)
            if row is None:
                continue
            cap, source = row.capability, row.source
        support = _support(torch.archs, cap, known)
        if support == "yes":
            continue
        listed = " ".join(torch.archs)
        named = f"torch {torch.version}" if torch.version else "torch"
        build = best_build(known, env, cap, _base(torch.version or ""))
        if support == "ptx":
            yield Verdict(
                code="gpu-arch-ptx-only",
                severity="warning",
                title=f"{named} has only PTX for {device.name} (sm_{cap[0]}{cap[1]})",
                why=f"The build carries {listed}: no compiled code for compute capability "
                f"{cap[0]}.{cap[1]} ({source}), only PTX that the driver compiles at first use "
                "(slow start, and no kernel where the PTX is newer than the driver).",
                fix=_fix_for(build, cap),
                commands=(install_torch_command(env, build),) if build else (),
                sources=(build.source,) if build else (),
            )
            continue
        yield Verdict(
            code="gpu-arch-unsupported",
            severity="broken",
            title=f"{device.name} (sm_{cap[0]}{cap[1]}) is not among {named}'s architectures",
            why=f"GPU {device.index} has compute capability {cap[0]}.{cap[1]} ({source}); "
            f"this torch was compiled for {listed}, and none of them runs on it: CUDA calls "
            "fail with 'no kernel image is available for execution on the device'.",
            fix=_fix_for(build, cap),
            commands=(install_torch_command(env, build),) if build else (),
            sources=tuple(r.source for r in (build,) if r)
            + tuple(known.code_rule(capability(a)).source for a in torch.archs[:1]),
        )


def _check_driver(env: Environment, known: Tables) -> Iterable[Verdict]:
    """The driver against torch's CUDA runtime: too old (broken), or only minor compatible.

    Broken below NVIDIA's minimum for the runtime's major on this OS (minor version
    compatibility): CUDA cannot start at all. A warning between that minimum and the driver of
    the runtime's own release (the driver reports the newest CUDA it supports in full): most
    of CUDA works, PTX of a newer toolkit cannot be compiled.
    """
    torch, nvml = env.torch, env.nvml
    if nvml is None or not nvml.devices or not torch.cuda:
        return
    driver_cuda = _driver_cuda(nvml)
    runtime = _cuda_tuple(torch.cuda)
    row = known.driver_row(torch.cuda)
    device = nvml.devices[0]
    cap = device.capability
    if cap is None:
        named = known.gpu_capability(device.name)
        cap = named.capability if named else None
    build = best_build(known, env, cap, _base(torch.version or "")) if cap else None
    shown = f"{driver_cuda[0]}.{driver_cuda[1]}" if driver_cuda else "unknown"
    if driver_runs(known, torch.cuda, env) is False:
        yield _too_old(env, nvml, known, build)
    elif driver_cuda is not None and driver_cuda < runtime[:2]:
        full = build if build and _cuda_tuple(build.cuda) <= driver_cuda else None
        yield Verdict(
            code="driver-minor-compat",
            severity="warning",
            title=f"torch's CUDA {torch.cuda} runs on driver {nvml.driver_version} (CUDA "
            f"{shown}) with a limited feature set",
            why="Minor version compatibility lets a newer CUDA 12 or 13 runtime run on an older "
            "driver of the same major, but PTX the driver cannot compile fails "
            "('the provided PTX was compiled with an unsupported toolchain').",
            fix=(
                f"Update the driver, or install torch {full.torch} built for CUDA {full.cuda}."
                if full
                else f"Update the driver to one that supports CUDA {torch.cuda} fully."
            ),
            commands=(install_torch_command(env, full),) if full else (),
            sources=tuple(r.source for r in (row, full) if r),
        )


def _too_old(
    env: Environment, nvml: NvmlReading, known: Tables, build: TorchBuildRow | None
) -> Verdict:
    """The verdict: CUDA X needs driver >= Y on this OS, the driver is Z; upgrade, or another torch."""
    torch = env.torch
    cuda = torch.cuda or ""
    row = known.driver_row(cuda)
    system = system_of(env)
    needed = needed_driver(row, system)
    driver_cuda = _driver_cuda(nvml)
    driver = nvml.driver_version or "of a version not known"
    runs = f", which runs CUDA {driver_cuda[0]}.{driver_cuda[1]} at most" if driver_cuda else ""
    major = cuda.split(".", 1)[0]
    fix = f"Upgrade the NVIDIA driver to one {needed}" if needed else "Install a newer driver"
    commands: tuple[str, ...] = ()
    if build is not None and build.cuda != cuda:
        full = driver_cuda is not None and _cuda_tuple(build.cuda) <= driver_cuda
        how = "in full" if full else "under minor version compatibility"
        fix += f"; or install torch {build.torch} built for CUDA {build.cuda}, which it runs {how}"
        commands = (install_torch_command(env, build),)
    named = f"torch {torch.version}" if torch.version else "torch"
    return Verdict(
        code="driver-too-old",
        severity="broken",
        title=f"The NVIDIA driver {nvml.driver_version or ''}".rstrip()
        + f" is too old for torch's CUDA {cuda}",
        why=f"{named} is built for CUDA {cuda} ({torch.source or 'torch.version.cuda'}); "
        f"CUDA {major}.x needs an NVIDIA driver {needed or 'newer than this one'} (NVIDIA's "
        f"minimum under minor version compatibility); the driver is {driver} "
        f"({nvml.library}){runs}: torch.cuda.is_available() is False ('The NVIDIA driver on "
        "your system is too old', 'CUDA driver version is insufficient for CUDA runtime "
        "version').",
        fix=fix + ".",
        commands=commands,
        sources=tuple(r.source for r in (row, build if commands else None) if r is not None),
    )


def needed_driver(row: object, system: str | None = None) -> str:
    """The driver a CUDA runtime's table row asks for, in words (``""`` when it says none).

    For ``system`` (``linux``, ``windows``) its own minimum; for an unknown one, each
    system's that the row gives.
    """
    from errkb.advisors.environment._tables import DriverRow

    if not isinstance(row, DriverRow):
        return ""
    names = {"linux": "Linux", "windows": "Windows"}
    if system in names:
        exact = row.linux if system == "linux" else row.windows
        if exact:
            return f">= {exact} ({names[system]})"
        return f"of branch {row.minimum} or newer ({names[system]})" if row.minimum else ""
    if row.linux and row.windows:
        return f">= {row.linux} (Linux) / >= {row.windows} (Windows)"
    if row.linux and row.minimum:
        return f">= {row.linux} (Linux), of branch {row.minimum} or newer elsewhere"
    if row.minimum:
        return f"of branch {row.minimum} or newer"
    return ""


# -- the installed set ---------------------------------------------------------------------


def _index_for(env: Environment, requirement: str, known: Tables) -> str:
    """`` --index-url`` that keeps the installed torch's CUDA build, where a table row says so.

    For an exact pin of torch (``torch==2.13.0``) when the installed torch is a ``+cuXYZ``
    build and the table lists that release for that CUDA; else ``""`` (PyPI's build).
    """
    name, _, pinned = requirement.partition("==")
    label = (env.torch.version or "").partition("+")[2]
    if name.strip().lower() != "torch" or not re.fullmatch(r"cu\d+", label):
        return ""
    for row in known.torch_builds:
        if row.torch == pinned.strip() and row.index_url.endswith("/" + label):
            return f" --index-url {row.index_url}"
    return ""


def _check_requirements(env: Environment, known: Tables) -> Iterable[Verdict]:
    by_dist: dict[str, list[Broken]] = {}
    for broken in env.stack.broken:
        by_dist.setdefault(broken.distribution, []).append(broken)
    for name, items in by_dist.items():
        first = items[0]
        wants = "; ".join(
            f"{b.requirement} ({'missing' if b.installed is None else b.installed + ' is installed'})"
            for b in items
        )
        commands = []
        plain = [b.requirement for b in items if not _index_for(env, b.requirement, known)]
        torchy = [b.requirement for b in items if _index_for(env, b.requirement, known)]
        if plain:
            commands.append("pip install " + " ".join(f'"{r}"' for r in plain))
        if torchy:  # from the index of the installed torch's CUDA build, to keep it
            quoted = " ".join(f'"{r}"' for r in torchy)
            commands.append(f"pip install {quoted}{_index_for(env, torchy[0], known)}")
        yield Verdict(
            code="requirement-broken",
            severity="broken",
            title=f"{name} {first.version} requires what is not installed: "
            + ", ".join(b.requirement for b in items),
            why=(
                f"pip check ({env.stack.source}) says {name} {first.version} requires {wants}."
                if env.stack.source.startswith("the paste")
                else f"{name}'s metadata (Requires-Dist) asks for {wants}, as pip check would say."
            ),
            fix=f"Install what {name} {first.version} requires, or a release of {name} made "
            "for what is installed.",
            commands=tuple(commands),
        )


def rebuild_command(name: str, version: str) -> str:
    """Build ``name`` again from source against the installed torch; keep every other package.

    ``--no-binary``: a wheel would bring the same binary back; ``--no-build-isolation``: the
    build sees the installed torch; ``--no-deps``: torch and the rest stay as they are;
    ``--no-cache-dir``: pip would reuse the wheel it built before, against the old torch.
    """
    return (
        "pip install --no-build-isolation --no-deps --force-reinstall --no-cache-dir "
        f"--no-binary {name} {name}=={version}"
    )


_TORCH_SYMBOL = re.compile(r"undefined symbol: (_ZN?K?(?:3c10|2at|5torch|6caffe2)\w*)")
_SYMBOL = re.compile(r"undefined symbol: (\S+)")
_CUDA_LIBRARY = re.compile(r"(lib(?:cu\w+|nv\w+)\.so\.(\d+))\S*: cannot open shared object file")


def _check_extensions(env: Environment, known: Tables) -> Iterable[Verdict]:
    failed: dict[str, list[Extension]] = {}
    for ext in env.extensions:
        if ext.error is not None and bnb_cpu_library(env) is not ext:
            failed.setdefault(ext.distribution, []).append(ext)
    for exts in failed.values():
        yield extension_verdict(env, known, exts[0], len(exts))


def extension_verdict(env: Environment, known: Tables, ext: Extension, count: int = 1) -> Verdict:
    """The verdict on compiled extension ``ext`` that fails to load (``count`` of its files)."""
    torch = env.torch
    more = f" ({count - 1} more of its files fail too)" if count > 1 else ""
    named = f"{ext.distribution} {ext.version}" if ext.version else ext.distribution
    title = f"{named}: {ext.name} does not load{more}"
    error = ext.error or ""
    pinned = _torch_pin_broken(env, ext.distribution)
    symbol = _TORCH_SYMBOL.search(error)
    library = _CUDA_LIBRARY.search(error)
    if symbol or pinned:
        why = (
            f"It was built against another torch: the symbol {symbol.group(1)} is in torch's C++ "
            f"library, and torch {torch.version} does not have it."
            if symbol
            else "It was built for another torch."
        )
        if pinned:
            return Verdict(
                code="extension-other-torch",
                severity="broken",
                title=title,
                why=f"{why} {ext.distribution} {ext.version} requires {pinned.requirement}, and "
                f"torch {pinned.installed} is installed.",
                fix=f"Install the torch {ext.distribution} {ext.version} was built for, or a "
                f"release of {ext.distribution} built for torch {torch.version}.",
                commands=(
                    f'pip install "{pinned.requirement}"'
                    + _index_for(env, pinned.requirement, known),
                ),
            )
        return Verdict(
            code="extension-other-torch",
            severity="broken",
            title=title,
            why=f"{why} Loading {ext.path}: {error}",
            fix=f"Build {ext.distribution} {ext.version} again, against the installed torch.",
            commands=(rebuild_command(ext.distribution, ext.version),),
        )
    if library is not None:
        wanted = int(library.group(2))
        have = torch.cuda.split(".")[0] if torch.cuda else None
        if have is not None and str(wanted) != have:
            return Verdict(
                code="extension-other-cuda",
                severity="broken",
                title=title,
                why=f"It needs {library.group(1)}, the CUDA {wanted} runtime, and torch "
                f"{torch.version} brings CUDA {torch.cuda}: it was built for another CUDA.",
                fix=f"Build {ext.distribution} {ext.version} again, against the installed torch.",
                commands=(rebuild_command(ext.distribution, ext.version),),
            )
    other = _SYMBOL.search(error)
    why = f"Loading {ext.path}: {error}"
    if other is not None:
        why += " (a symbol of a library it was built against is missing from the one installed)"
    return Verdict(
        code="extension-fails",
        severity="broken",
        title=title,
        why=why,
        fix="errkb has no computed fix for this error yet; the error says what failed.",
    )


# -- bitsandbytes ----------------------------------------------------------------------------

#: bitsandbytes' CPU build of its native library (``libbitsandbytes_cpu.so``, ``.dll``; the
#: stem alone where a paste says it was compiled without GPU support but not its file).
_BNB_CPU = re.compile(r"^libbitsandbytes_cpu(?:\.(?:so|dll|dylib))?$")


#: Where bitsandbytes chooses its CPU library: no library for torch's CUDA (0.45.5; the same
#: fallback from 0.43.1), torch.cuda not available (0.42.0).
_BNB_BLOB = "https://github.com/bitsandbytes-foundation/bitsandbytes/blob"
_BNB_LOADER = (
    f"{_BNB_BLOB}/d72cb9cb6046ae17a2cec9bd628b860aa4891110/bitsandbytes/cextension.py#L63-L70",
    f"{_BNB_BLOB}/4870580f17767a4165ec05d954dff2b5c25b694d/bitsandbytes/cuda_setup/main.py#L341",
)


def bnb_cpu_library(env: Environment) -> Extension | None:
    """The CPU library of bitsandbytes, loaded, where CUDA is there to use; else ``None``.

    There is CUDA to use when torch is a CUDA build, or when an NVIDIA GPU is present and torch
    is not known to be a CPU build (a CPU-only torch with a GPU is ``cpu-torch-with-gpu``: the
    fix is torch). A CPU library that did not load is an extension that fails, not this.
    """
    torch, nvml = env.torch, env.nvml
    gpu = nvml is not None and bool(nvml.devices)
    if torch.cpu_only or not (torch.cuda or gpu):
        return None
    return next(
        (e for e in env.extensions if e.distribution.lower() == "bitsandbytes"
         and e.error is None and _BNB_CPU.search(e.name)),
        None,
    )  # fmt: skip


def bitsandbytes_release(env: Environment, known: Tables) -> ExtensionBuildRow | None:
    """The newest bitsandbytes release in errkb's table with a library for torch's CUDA.

    Its wheel (the one read for the table) ships ``libbitsandbytes_cudaXYZ`` for torch's CUDA,
    its torch requirement admits the installed torch, and it was read in a wheel for this
    operating system (``win_*`` for Windows; ``manylinux*`` or the pure wheel, whose libraries
    are Linux ``.so`` files, for Linux). ``None`` when torch's CUDA is not known or no row fits.
    """
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version

    cuda = ".".join((env.torch.cuda or "").split(".")[:2])
    system = system_of(env)
    if not cuda or system is None:
        return None
    try:
        installed = Version(_base(env.torch.version or ""))
    except InvalidVersion:
        installed = None
    platforms = ("win",) if system == "windows" else ("manylinux", "any")
    fitting = []
    for row in known.extension_builds:
        if row.distribution != "bitsandbytes" or cuda not in row.cuda:
            continue
        if not row.platform.startswith(platforms):
            continue
        try:
            admits = installed is None or not row.torch or installed in SpecifierSet(row.torch)
        except InvalidSpecifier:
            admits = False
        if admits:
            fitting.append(row)
    return max(fitting, key=lambda r: Version(r.version)) if fitting else None


def _check_bitsandbytes(env: Environment, known: Tables) -> Iterable[Verdict]:
    """The CPU library of bitsandbytes where torch or the GPU has CUDA: no GPU functions."""
    ext = bnb_cpu_library(env)
    if ext is None:
        return
    torch, nvml = env.torch, env.nvml
    named = f"bitsandbytes {ext.version}" if ext.version else "bitsandbytes"
    where = []
    if torch.cuda:
        where.append(f"torch {torch.version} is built for CUDA {torch.cuda}")
    if nvml is not None and nvml.devices:
        where.append(f"{nvml.devices[0].name} is present ({nvml.library})")
    row = bitsandbytes_release(env, known)
    if row is not None:
        fix = (
            f"Install bitsandbytes {row.version}: its {row.platform} wheel ships a library for "
            f"CUDA {'.'.join((torch.cuda or '').split('.')[:2])}, and it admits torch "
            f"{_base(torch.version or '')}."
        )
    elif torch.cuda:
        fix = (
            f"errkb's tables hold no bitsandbytes release with a library for CUDA {torch.cuda} "
            "on this system; build bitsandbytes from source with its CUDA backend."
        )
    else:
        fix = (
            "Install the bitsandbytes release that ships a library for torch's CUDA (which CUDA "
            "torch is built for is not known here: python -m torch.utils.collect_env says it)."
        )
    yield Verdict(
        code="bitsandbytes-cpu-library",
        severity="broken",
        title=f"{named} uses its CPU library, compiled without GPU support",
        why=f"{ext.path or ext.name} is bitsandbytes' CPU build: its 8-bit optimizers, 8-bit "
        "multiplication and GPU quantization are unavailable, and a call to one fails on a "
        f"function the library does not have; yet {' and '.join(where)}. bitsandbytes loads "
        "its CPU library when it has none for torch's CUDA (0.43.1 to 0.45.5), or when "
        "torch.cuda.is_available() is False (0.42.0 and older).",
        fix=fix,
        commands=(f"pip install --force-reinstall --no-deps bitsandbytes=={row.version}",)
        if row is not None
        else (),
        sources=((row.source,) if row is not None else ()) + _BNB_LOADER,
    )


def _torch_pin_broken(env: Environment, name: str) -> Broken | None:
    for broken in env.stack.broken:
        if broken.distribution == name and broken.required.lower() == "torch":
            return broken
    return None


# -- the system ----------------------------------------------------------------------------


def _check_shm(env: Environment, known: Tables) -> Iterable[Verdict]:  # noqa: ARG001
    system = env.system
    if system.container is None or system.shm_bytes is None or system.shm_bytes >= SHM_MINIMUM:
        return
    half = max(1, (system.memory_bytes or 0) // 2 // _GIB)
    gpus = env.nvml is not None and bool(env.nvml.devices)
    size = f"{system.shm_bytes / (1 << 20):.0f} MiB"
    yield Verdict(
        code="shm-small",
        severity="broken" if gpus else "warning",
        title=f"/dev/shm is {size} in this {system.container} container",  # noqa: S108
        why="DataLoader workers pass batches through /dev/shm and NCCL uses it between "
        "processes on one machine: with under 1 GiB they fail ('Bus error', 'unhandled "
        "system error', 'No space left on device').",
        fix=f"Start the container with a larger /dev/shm: half the memory ({half} GiB) is what "
        "a Linux host's /dev/shm gets by default; or share the host's with --ipc=host.",
        commands=(f"docker run --shm-size={half}g ...",),
    )


#: The checks, in the order their verdicts are listed at the same severity.
CHECKS: tuple[Callable[[Environment, Tables], Iterable[Verdict]], ...] = (
    _check_no_gpu,
    _check_torch,
    _check_cpu_torch,
    _check_arch,
    _check_driver,
    _check_requirements,
    _check_extensions,
    _check_bitsandbytes,
    _check_shm,
)
