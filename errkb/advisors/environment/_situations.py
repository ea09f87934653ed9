"""The environment's errors that no check of the doctor judges, answered from what they say.

Each function takes what the advisor gathered (the message, the traceback's files, the
``environment`` reading of this machine when the error was raised here, ``None`` for a pasted
one) and gives ``(verdict, facts, notes)``: the verdict's command is the fix, shown, never run.

- a rendezvous port that is taken (:mod:`errkb.advisors.environment._launch`);
- a DataLoader worker's bus error and NCCL's "unhandled system error", when ``/dev/shm`` is the
  cause: the doctor's ``shm-small`` verdict where the machine is read, the message's own words
  (NCCL's "Last error" naming ``/dev/shm``) where it is pasted;
- a module compiled for another numpy: ``numpy<2`` or a newer numpy, checked against what the
  installed distributions require (``Requires-Dist``); a module built against a newer numpy
  1.x C-API than the installed numpy's: the first release of that C-API version, below 2;
- vLLM's compiled module missing: a source tree that shadows the installed vLLM, named from the
  traceback's files;
- bitsandbytes' native library that did not load (``lib`` is None): the CPU-only torch the
  doctor names, else bitsandbytes' own diagnosis (``python -m bitsandbytes``);
- safetensors' ``No such device (os error 19)``: the path it was given is a folder, or the
  file's mount (``/proc/self/mounts``) cannot be memory-mapped.
"""

from __future__ import annotations

import re
from pathlib import PurePath
from typing import TYPE_CHECKING, Literal

from errkb.advisors.environment._model import Verdict
from errkb.findings import Fact

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from packaging.specifiers import SpecifierSet

    from errkb.advisors import Captures
    from errkb.advisors.environment._tables import ExtensionBuildRow
    from errkb.probes.environment import Environment
    from errkb.probes.launch import LaunchReading
    from errkb.probes.stack import Distribution

__all__ = [
    "CUDA_WHEELS",
    "Judged",
    "compiled_module",
    "cuda_wheel",
    "cutlass_kernel",
    "extension_not_built",
    "mapped_path",
    "native_library",
    "numpy_abi",
    "numpy_c_api",
    "port",
    "shared_memory",
]

#: What each answer gives: the verdict (its command the fix), facts, notes.
Judged = tuple[Verdict | None, list[Fact], list[str]]

_SITE = re.compile(r"[/\\](?:site|dist)-packages[/\\]")
#: NCCL's "Last error" when its shared-memory transport fails (a pattern, not a file errkb opens).
_SHM_WORDS = re.compile(r"/dev/shm|shared memory|\bshm_open\b", re.IGNORECASE)  # noqa: S108


# -- a rendezvous port ---------------------------------------------------------------------


def port(
    caps: Captures,
    text: str,
    launch: LaunchReading | None,
    functions: Sequence[str],
    *,
    live: bool,
) -> Judged:
    """A taken rendezvous port: the launch again on a free port, or ``--standalone``."""
    from errkb.advisors.environment._launch import pasted_verdict, port_verdict

    number = caps.integer("port")
    # A port is a name, not a quantity: shown as written, never as "29,500".
    facts = [Fact(name="port", value=str(number), source="message")] if number is not None else []
    if not live:
        verdict, notes = pasted_verdict(number, text)
        return verdict, facts, notes
    if launch is None:
        return None, facts, ["environment: the launch probe did not run (probes are off)."]
    if launch.free_port is not None:
        facts.append(
            Fact(name="free_port", value=str(launch.free_port), source="probe",
                 note="a socket bound to port 0 on this machine, then closed")
        )  # fmt: skip
    verdict, notes = port_verdict(number, launch, "_env_rendezvous_handler" in functions)
    return verdict, facts, notes


# -- /dev/shm --------------------------------------------------------------------------------


def shared_memory(kind: str, text: str, env: Environment | None) -> Judged | None:
    """A bus error in a DataLoader worker, or NCCL's system error: is ``/dev/shm`` the cause?

    NCCL's error is answered only when it is the system error ("unhandled system error", or its
    detail line "ncclSystemError: ..."); its other errors (a CUDA error, invalid usage) are not
    the environment's.
    """
    if kind == "nccl" and "unhandled system error" not in text and "ncclSystemError" not in text:
        return None
    named = _SHM_WORDS.search(text) is not None if kind == "nccl" else True
    facts: list[Fact] = []
    if env is None:
        if kind == "nccl" and not named:
            unnamed = (
                "environment: NCCL's 'Last error' line (NCCL_DEBUG=INFO prints it) says which "
                "system call failed; the message pasted does not name /dev/shm."
            )
            return None, facts, [unnamed, *_transports(text)]
        unsized = (
            "environment: the message does not say how large /dev/shm is there, or the "
            "machine's memory: no --shm-size is computed."
        )
        return _pasted_shm(kind), facts, [unsized]
    from errkb.advisors.environment.verdicts import judge

    system = env.system
    if system.shm_bytes is not None:
        facts.append(
            Fact(name="dev_shm", value=f"{system.shm_bytes / (1 << 20):.0f} MiB", source="probe",
                 note="statvfs('/dev/shm')")
        )  # fmt: skip
    if system.container:
        facts.append(Fact(name="container", value=system.container, source="probe"))
    shm = next((v for v in judge(env) if v.code == "shm-small"), None)
    if shm is not None:
        return shm, facts, []
    notes = ["environment: /dev/shm is not small here (1 GiB or more, or not in a container)."]
    if kind == "nccl":
        nccl = [f"{k}={v}" for k, v in system.variables if k.startswith("NCCL_")]
        if nccl:
            facts.append(Fact(name="nccl_variables", value=" ".join(nccl), source="probe",
                              note="the environment"))  # fmt: skip
        notes.append(
            "environment: NCCL's 'Last error' line (NCCL_DEBUG=INFO prints it) says which system "
            "call failed."
        )
    return None, facts, notes


#: NCCL's log lines naming the transport it set up: InfiniBand/RoCE, and GPU peer-to-peer.
_NCCL_IB = re.compile(r"\bNET/IB\b")
_NCCL_P2P = re.compile(r"\bvia P2P/|\bP2P/(?:IPC|CUMEM|direct)\b")


def _transports(text: str) -> list[str]:
    """What the pasted NCCL log says it was using, and the variable that turns it off to test.

    Turning a transport off is a test, not a fix: NCCL falls back to a slower one.
    """
    notes = []
    if _NCCL_IB.search(text):
        notes.append(
            "environment: NCCL's log shows it using InfiniBand/RoCE (NET/IB); NCCL_IB_DISABLE=1 "
            "makes it use sockets instead, which tells whether that transport fails (slower)."
        )
    if _NCCL_P2P.search(text):
        notes.append(
            "environment: NCCL's log shows GPU peer-to-peer channels (P2P); NCCL_P2P_DISABLE=1 "
            "turns them off, which tells whether peer access fails (slower)."
        )
    return notes


def _pasted_shm(kind: str) -> Verdict:
    what = (
        "NCCL could not create its shared-memory segment in /dev/shm"
        if kind == "nccl"
        else "A DataLoader worker was killed by a bus error writing to /dev/shm"
    )
    return Verdict(
        code="shm-small",
        severity="broken",
        title=what,
        why="Processes on one machine pass tensors through /dev/shm; Docker gives a container "
        "64 MiB of it unless told otherwise, and a write past the end is a bus error or a failed "
        "shm_open.",
        fix="Start the container with a larger /dev/shm (docker run --shm-size=<size>, e.g. half "
        "the machine's memory), or share the host's with --ipc=host; outside a container, check "
        "df -h /dev/shm.",
    )


# -- numpy's binary interface ----------------------------------------------------------------


def numpy_abi(caps: Captures, env: Environment | None, files: Sequence[str]) -> Judged:
    """A module compiled for another numpy: pin numpy below 2, or upgrade numpy.

    "compiled using NumPy 1.x cannot be run in NumPy 2.x": the module needs ``numpy<2`` (or a
    release of its own built for numpy 2). Cython's "numpy.dtype size changed ... Expected E
    from C header, got G": the module was built against a numpy whose type is larger (E > G),
    a newer one: numpy needs upgrading; E < G is only Cython's warning.
    """
    if caps.text("module_api") is not None:
        return numpy_c_api(caps, env, files)
    facts: list[Fact] = []
    module = _failing_package(files)
    if module is not None:
        facts.append(Fact(name="module", value=module, source="message",
                          note="the innermost package of the traceback outside numpy"))  # fmt: skip
    running = caps.text("numpy")
    expected, got = caps.integer("expected"), caps.integer("got")
    abi = _abi_versions(caps)
    if abi is not None:
        facts.append(Fact(name="numpy_c_abi", value=f"module 0x{abi[0]:x}, numpy 0x{abi[1]:x}",
                          source="message", note="the C ABI the module was built for, and numpy's"))  # fmt: skip
        if not abi[0] < _NUMPY_2_ABI <= abi[1]:
            return None, facts, []
        wanted, why = (
            "numpy<2",
            (
                f"The module was compiled against numpy 1.x (C ABI 0x{abi[0]:x}), and numpy 2 "
                f"(C ABI 0x{abi[1]:x}) is installed: modules built for 1.x cannot load."
            ),
        )
    elif running is not None:
        facts.append(Fact(name="numpy", value=running, source="message"))
        wanted, why = (
            "numpy<2",
            (
                f"The module was compiled against numpy 1.x, and numpy {running} is installed: "
                "numpy 2 changed the binary interface, and modules built for 1.x cannot load."
            ),
        )
    elif expected is not None and got is not None:
        facts.append(
            Fact(name="numpy_type_size", value=f"{expected} bytes expected, {got} found",
                 source="message", note="Cython's check of numpy's C types when the module loads")
        )  # fmt: skip
        if expected <= got:
            larger = (
                "environment: the installed numpy's type is larger than the module's build saw: "
                "Cython warns, and the module works."
            )
            return None, facts, [larger]
        wanted, why = (
            "numpy",
            (
                f"The module was built against a newer numpy: its C header gives {expected} bytes "
                f"for the type and the installed numpy has {got}."
            ),
        )
    else:
        return None, facts, []
    return _numpy_verdict(wanted, why, module, env, facts)


def _numpy_verdict(
    wanted: str, why: str, module: str | None, env: Environment | None, facts: list[Fact]
) -> Judged:
    notes: list[str] = []
    installed = env.stack.distributions if env is not None else ()
    numpy = next((d for d in installed if d.name.lower() == "numpy"), None)
    if numpy is not None:
        facts.append(Fact(name="installed_numpy", value=numpy.version, source="probe",
                          note=numpy.folder))  # fmt: skip
    against = _requiring(installed, below_two=wanted == "numpy<2")
    owner = _distribution_of(module, installed)
    commands: tuple[str, ...]
    if against:
        names = ", ".join(f"{d.name} {d.version} ({r})" for d, r in against)
        why += f" Changing numpy would break what the installed set requires: {names}."
        if owner is None or wanted != "numpy<2":
            return None, facts, [f"environment: {why}"]
        commands = (f"pip install --upgrade {owner.name}",)
        fix = (
            f"Upgrade {owner.name} to a release built for numpy 2 (the installed distributions "
            "require numpy 2)."
        )
    elif wanted == "numpy<2":
        commands = ('pip install "numpy<2"',)
        fix = "Install numpy 1.x, which the module was compiled for"
        fix += f", or a release of {owner.name} built for numpy 2." if owner else "."
    else:
        commands = ("pip install --upgrade numpy",)
        fix = "Upgrade numpy: the module was built against a newer release."
    if env is None:
        notes.append(
            "environment: the requirements of the installed distributions were not read (a "
            "pasted message); pip check after the command shows what it breaks."
        )
    elif not against:
        notes.append(
            f"environment: no installed distribution of the stack rules out {wanted} "
            "(Requires-Dist)."
        )
    verdict = Verdict(
        code="numpy-abi",
        severity="broken",
        title=f"{module or 'A compiled module'} was built for another numpy",
        why=why,
        fix=fix,
        commands=commands,
    )
    return verdict, facts, notes


#: numpy 2's C ABI version (numpy/_core/meson.build at the v2.0.0 tag, line 21); numpy 1.x's
#: is 0x01000009 (numpy/core/setup_common.py at v1.26.4, line 24).
_NUMPY_2_ABI = 0x02000000


def _abi_versions(caps: Captures) -> tuple[int, int] | None:
    """The module's and numpy's C ABI versions a message names (hexadecimal), or ``None``."""
    module, running = caps.text("module_abi"), caps.text("numpy_abi")
    if module is None or running is None:
        return None
    try:
        return int(module, 16), int(running, 16)
    except ValueError:
        return None


#: The first numpy release of each C-API version a numpy 1.x header can name (version 8 names
#: none): numpy/_core/code_generators/cversions.txt at the v2.4.0 tag, commit c5ab79c, lines
#: 15-74.
_C_API_RELEASES = {
    0x6: (1, 6), 0x7: (1, 7), 0x9: (1, 8), 0xA: (1, 10), 0xB: (1, 13), 0xC: (1, 14),
    0xD: (1, 16), 0xE: (1, 20), 0xF: (1, 22), 0x10: (1, 23), 0x11: (1, 25),
}  # fmt: skip
#: The last minor release of numpy 1.x.
_LAST_ONE_MINOR = 26


def numpy_c_api(caps: Captures, env: Environment | None, files: Sequence[str]) -> Judged:
    """A module built against a newer numpy 1.x C-API than the running numpy's: upgrade numpy.

    numpy 1.x's header compiles the check into the module (``NPY_FEATURE_VERSION`` above the
    running numpy's): the module needs the first numpy release of its C-API version, and, built
    with 1.x headers, a numpy below 2. An installed distribution whose numpy requirement admits
    no release from there to 1.26 rules the upgrade out: no command then, and its name.
    """
    facts: list[Fact] = []
    module = _failing_package(files)
    if module is not None:
        facts.append(Fact(name="module", value=module, source="message",
                          note="the innermost package of the traceback outside numpy"))  # fmt: skip
    try:
        wanted = int(caps.text("module_api") or "", 16)
        running = int(caps.text("numpy_api") or "", 16)
    except ValueError:
        return None, facts, []
    facts.append(
        Fact(name="numpy_c_api", value=f"module 0x{wanted:x}, numpy 0x{running:x}",
             source="message", note="the C-API version the module was built for, and numpy's")
    )  # fmt: skip
    release = _C_API_RELEASES.get(wanted)
    if wanted <= running:
        return None, facts, ["environment: the module's C-API version is not above numpy's."]
    if release is None:
        return None, facts, [f"environment: no numpy 1.x release is known for C-API 0x{wanted:x}."]
    first = f"{release[0]}.{release[1]}"
    requirement = f"numpy>={first},<2"
    installed = env.stack.distributions if env is not None else ()
    numpy = next((d for d in installed if d.name.lower() == "numpy"), None)
    if numpy is not None:
        facts.append(Fact(name="installed_numpy", value=numpy.version, source="probe",
                          note=numpy.folder))  # fmt: skip
    why = (
        f"The module was built against numpy {first} or newer (C-API 0x{wanted:x}), and the "
        f"installed numpy has C-API 0x{running:x}: the module refuses to load."
    )
    against = _ruling_out(installed, release[1])
    if against:
        names = ", ".join(f"{d.name} {d.version} ({r})" for d, r in against)
        blocked = (
            f"environment: {why} Upgrading numpy would break what the installed set requires: "
            f"{names}; a release of {module or 'the module'} built for the older numpy is the fix."
        )
        return None, facts, [blocked]
    unread = (
        "environment: the requirements of the installed distributions were not read (a pasted "
        "message); pip check after the command shows what it breaks."
    )
    checked = f"environment: no installed distribution of the stack rules out {requirement}."
    notes = [unread if env is None else checked]
    verdict = Verdict(
        code="numpy-c-api-too-old",
        severity="broken",
        title=f"{module or 'A compiled module'} was built for a newer numpy",
        why=why,
        fix=f"Upgrade numpy to {first} or a newer 1.x (the module was built with numpy 1.x "
        "headers).",
        commands=(f'pip install "{requirement}"',),
    )
    return verdict, facts, notes


def _ruling_out(installed: Sequence[Distribution], minor: int) -> list[tuple[Distribution, str]]:
    """The distributions whose numpy requirement admits no numpy 1.``minor`` to 1.26."""
    from packaging.version import Version

    releases = [Version(f"1.{m}.0") for m in range(minor, _LAST_ONE_MINOR + 1)]
    releases.append(Version(f"1.{_LAST_ONE_MINOR}.4"))
    return [
        (dist, f"numpy{spec}")
        for dist, spec in _numpy_requirements(installed)
        if not any(spec.contains(v, prereleases=True) for v in releases)
    ]


def _numpy_requirements(
    installed: Sequence[Distribution],
) -> Iterator[tuple[Distribution, SpecifierSet]]:
    """Each installed distribution's unconditional numpy requirement, as its specifier set."""
    for dist in installed:
        for text in dist.requires:
            if "numpy" not in text.lower():  # most are not numpy's: not parsed (nor imported)
                continue
            from packaging.requirements import InvalidRequirement, Requirement

            try:
                req = Requirement(text)
            except InvalidRequirement:
                continue
            if req.name.lower() == "numpy" and req.marker is None:
                yield dist, req.specifier


def _failing_package(files: Sequence[str]) -> str | None:
    """The top package of the innermost traceback file in site-packages that is not numpy's."""
    for file in reversed(files):
        parts = _SITE.split(file.replace("\\", "/"), maxsplit=1)
        if len(parts) == 1:
            continue
        top = parts[1].split("/", 1)[0].removesuffix(".py")
        if top and top != "numpy" and not top.startswith("_"):
            return top
    return None


def _distribution_of(module: str | None, installed: Sequence[Distribution]) -> Distribution | None:
    if module is None:
        return None
    wanted = module.lower().replace("-", "_")
    return next((d for d in installed if d.name.lower().replace("-", "_") == wanted), None)


def _requiring(
    installed: Sequence[Distribution], *, below_two: bool
) -> list[tuple[Distribution, str]]:
    """The distributions whose numpy requirement rules out numpy 1.x (``below_two``) or 2.x."""
    rules_out = _needs_two if below_two else _needs_one
    return [
        (dist, f"numpy{specs}")
        for dist, specs in _numpy_requirements(installed)
        if any(rules_out(spec.operator, spec.version) for spec in specs)
    ]


def _major(version: str) -> int | None:
    head = version.split(".", 1)[0]
    return int(head) if head.isdigit() else None


def _needs_two(operator: str, version: str) -> bool:
    """``>=2.0``, ``>2``, ``==2.*``, ``~=2.1``: no numpy 1.x satisfies it."""
    major = _major(version)
    return major is not None and operator in (">=", ">", "==", "~=", "===") and major >= 2


def _needs_one(operator: str, version: str) -> bool:
    """``<2``, ``<2.0``, ``<=1.26``, ``==1.*``: no numpy 2.x satisfies it."""
    from packaging.version import InvalidVersion, Version

    if operator in ("==", "~=", "==="):
        return _major(version) is not None and (_major(version) or 0) < 2
    if operator not in ("<", "<="):
        return False
    try:
        bound = Version(version)
    except InvalidVersion:
        return False
    return bound <= Version("2") if operator == "<" else bound < Version("2")


# -- vLLM's compiled module ------------------------------------------------------------------


def compiled_module(env: Environment | None, files: Sequence[str]) -> Judged:
    """``No module named 'vllm._C'``: which vllm was imported, from where.

    A ``vllm`` package outside site-packages is a source tree (a clone of the repository, the
    current folder first on ``sys.path``) that shadows the installed wheel: its compiled modules
    were never built. The traceback's files say which folder it is. Otherwise, an installed vLLM
    whose torch pin the installed torch breaks is a wheel for another torch: the doctor's
    ``requirement-broken`` command installs what it pins.
    """
    facts: list[Fact] = []
    tree = _source_tree(files)
    installed = None
    if env is not None:
        installed = next((d for d in env.stack.distributions if d.name.lower() == "vllm"), None)
        if installed is not None:
            facts.append(Fact(name="installed_vllm", value=installed.version, source="probe",
                              note=installed.folder))  # fmt: skip
    if tree is None and env is not None:
        from errkb.advisors.environment.verdicts import judge

        pinned = next(
            (v for v in judge(env) if v.code == "requirement-broken"
             and v.title.startswith("vllm ") and "torch" in v.title),
            None,
        )  # fmt: skip
        if pinned is not None:  # a wheel built for another torch: what it pins is the fix
            return pinned, facts, []
    if tree is None:
        seen = any(_SITE.search(f.replace("\\", "/")) and "/vllm/" in f.replace("\\", "/")
                   for f in files)  # fmt: skip
        return None, facts, [
            "environment: the traceback shows vLLM from site-packages: the installed build "
            "lacks its compiled module (a wheel for another platform or an interrupted build)."
            if seen
            else "environment: no traceback frame says which vllm package was imported."
        ]  # fmt: skip
    facts.append(Fact(name="vllm_imported_from", value=f"{tree}/vllm", source="message",
                      note="the traceback's files"))  # fmt: skip
    if installed is not None:
        fix = (
            f"Python imported the source tree in {tree} instead of the installed vLLM "
            f"{installed.version}: run from another folder, or build the tree in place (with "
            "vLLM's precompiled binaries, no compiler needed)."
        )
    else:
        fix = (
            f"Build the source tree in {tree} in place: its compiled modules were never built "
            "(with vLLM's precompiled binaries, no compiler needed)."
        )
    verdict = Verdict(
        code="vllm-source-tree",
        severity="broken",
        title=f"vLLM was imported from the source tree {tree}, which has no compiled modules",
        why=f"The traceback runs through {tree}/vllm, outside site-packages: a clone of the "
        "repository on sys.path (the current folder comes first) shadows the installed package, "
        "and vllm._C is built only by installing it.",
        fix=fix,
        commands=(f"cd {_quoted(tree)} && VLLM_USE_PRECOMPILED=1 pip install --editable .",),
    )
    return verdict, facts, []


def _source_tree(files: Sequence[str]) -> str | None:
    """The folder holding the ``vllm`` package the traceback ran through, if not site-packages."""
    for file in files:
        path = PurePath(file.replace("\\", "/"))
        parts = path.parts
        if "vllm" not in parts[:-1] or _SITE.search(file.replace("\\", "/")):
            continue
        i = len(parts) - 1 - parts[:-1][::-1].index("vllm") - 1
        return str(PurePath(*parts[:i])) if i > 0 else None
    return None


def _quoted(path: str) -> str:
    import shlex

    return shlex.quote(path)


# -- bitsandbytes' native library ----------------------------------------------------------


#: bitsandbytes' CPU library named in a message ("libbitsandbytes_cpu.so: undefined symbol: ..."):
#: the library it loaded, which lacks the GPU function called.
_BNB_CPU_NAMED = re.compile(r"(?P<path>[^\s:'\"]*libbitsandbytes_cpu\.(?:so|dll|dylib))")


def _with_named_cpu_library(env: Environment, text: str) -> Environment:
    """``env`` with the CPU library the message names as bitsandbytes' loaded library.

    Only where the environment read has no library of bitsandbytes (a paste without ``python -m
    bitsandbytes``, a probe that found none to load).
    """
    from errkb._attrs import attrs
    from errkb.probes.extensions import Extension

    named = _BNB_CPU_NAMED.search(text)
    if named is None or any(e.distribution.lower() == "bitsandbytes" for e in env.extensions):
        return env
    bnb = next((d for d in env.stack.distributions if d.name.lower() == "bitsandbytes"), None)
    path = named["path"]
    ext = Extension(distribution="bitsandbytes", version=bnb.version if bnb else "",
                    kind="library", name=path.replace("\\", "/").rsplit("/", 1)[-1], path=path,
                    error=None, source="the message")  # fmt: skip
    return attrs.evolve(env, extensions=(*env.extensions, ext))


def native_library(
    env: Environment | None,
    text: str = "",
    *,
    source: Literal["probe", "paste"] = "probe",
    loaded: bool = False,
) -> Judged:
    """Why bitsandbytes' ``lib`` is None or its CPU build, where the machine says.

    ``env`` is this machine (``source`` ``probe``) or the one a paste's report tools describe;
    ``text`` the message, which may name the CPU library bitsandbytes loaded; ``loaded``: the
    message says its CPU library loaded (its warning, or a GPU function missing from it), so
    where the machine does not say that CUDA is there to use, no verdict is given.
    A CPU-only torch on a machine with a GPU is the doctor's ``cpu-torch-with-gpu`` (bitsandbytes
    looks for the library of torch's CUDA, and a CPU torch has none); bitsandbytes' CPU library
    where torch or the GPU has CUDA is the doctor's ``bitsandbytes-cpu-library`` (the release
    with a library for torch's CUDA); otherwise the loader's error is what ``python -m
    bitsandbytes`` prints, and the verdict says to run it.
    """
    facts: list[Fact] = []
    if env is not None:
        from errkb.advisors.environment.verdicts import judge

        bnb = next((d for d in env.stack.distributions if d.name.lower() == "bitsandbytes"), None)
        if bnb is not None:
            facts.append(Fact(name="bitsandbytes", value=bnb.version, source=source,
                              note=bnb.folder))  # fmt: skip
        if env.torch.version:
            build = f"CUDA {env.torch.cuda}" if env.torch.cuda else "CPU only"
            facts.append(Fact(name="torch", value=f"{env.torch.version} ({build})",
                              source=source, note=env.torch.source))  # fmt: skip
        codes = ("cpu-torch-with-gpu", "bitsandbytes-cpu-library")
        found = next(
            (v for v in judge(_with_named_cpu_library(env, text)) if v.code in codes), None
        )
        if found is not None:
            return found, facts, []
        if env.torch.cpu_only:
            shown = "NVML shows" if source == "probe" else "the paste names"
            no_gpu = (
                f"environment: torch is CPU-only and {shown} no GPU: bitsandbytes has no CUDA "
                "library to load here."
            )
            return None, facts, [no_gpu]
    if loaded:
        unknown = (
            "environment: bitsandbytes loaded its CPU library; whether torch is a CUDA build or "
            "a GPU is present is not known here (python -m torch.utils.collect_env says both)."
        )
        return None, facts, [unknown]
    verdict = Verdict(
        code="bitsandbytes-library",
        severity="broken",
        title="bitsandbytes' native library did not load when it was imported",
        why="bitsandbytes keeps None in place of its library when loading it fails (a CUDA "
        "library it links to is missing, or no build for torch's CUDA), and the first quantized "
        "call fails on it; the loader's own error was logged at import.",
        fix="Run bitsandbytes' diagnosis, which names the library it tried and why it did not "
        "load.",
        commands=("python -m bitsandbytes",),
    )
    return verdict, facts, []


# -- safetensors' memory map -----------------------------------------------------------------


def mapped_path(path: str | None, mounts: str | None = None) -> Judged:
    """``No such device (os error 19)`` from ``safe_open``: a folder, or a mount without mmap.

    ``path`` is the file the traceback's frames were loading (``None``: not known, a pasted
    message); ``mounts`` the text of ``/proc/self/mounts`` (read here when ``None``).
    """
    from pathlib import Path

    if path is None:
        return None, [], ["environment: the message does not say which path was mapped."]
    facts = [Fact(name="path", value=path, source="frame", note="the file safe_open was given")]
    if Path(path).is_dir():
        verdict = Verdict(
            code="safetensors-folder",
            severity="broken",
            title="safe_open was given a folder, not a .safetensors file",
            why=f"{path} is a folder: mapping it into memory fails with ENODEV (os error 19).",
            fix="Pass the .safetensors file inside it.",
            commands=(f"ls {_quoted(path)}",),
        )
        return verdict, facts, []
    mount = _mount_of(path, mounts)
    if mount is None:
        return None, facts, ["environment: the mount holding the file could not be read."]
    point, fstype = mount
    facts.append(Fact(name="file_system", value=f"{fstype} at {point}", source="probe",
                      note="/proc/self/mounts"))  # fmt: skip
    verdict = Verdict(
        code="safetensors-no-mmap",
        severity="broken",
        title=f"The file is on a {fstype} mount that refuses memory mapping",
        why=f"{path} is on {point} ({fstype}); safetensors maps files into memory, and this "
        "file system answers mmap with ENODEV (os error 19).",
        fix="Copy the model to a local disk and load it from there, or mount the storage with "
        "options that allow mmap.",
    )
    return verdict, facts, []


def _mount_of(path: str, mounts: str | None) -> tuple[str, str] | None:
    """The mount point and file-system type of the longest mount holding ``path``."""
    from pathlib import Path

    if mounts is None:
        try:
            mounts = Path("/proc/self/mounts").read_text(encoding="utf-8")
        except OSError:
            return None
    real = str(Path(path).resolve())
    best: tuple[str, str] | None = None
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 3:  # device, mount point, type
            continue
        point = fields[1].replace("\\040", " ")
        inside = real == point or real.startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) > len(best[0])):
            best = (point, fields[2])
    return best


# -- the CUDA libraries torch's wheel pins ---------------------------------------------------

#: The CUDA library a record's message is about -> its wheel's name without ``-cuNN``.
CUDA_WHEELS = {"nvrtc": "nvidia-cuda-nvrtc", "cublas": "nvidia-cublas", "cufft": "nvidia-cufft"}
#: NVRTC's log when it cannot load its builtins library: the CUDA release that libnvrtc is of.
_BUILTINS = re.compile(r"libnvrtc-builtins\.so\.(\d+)\.(\d+)")


def cuda_wheel(library: str, text: str, env: Environment | None, *, pasted: bool = False) -> Judged:
    """A CUDA library of torch's failing: is the installed wheel the one torch pins?

    torch's Linux wheels pin each CUDA library's wheel exactly (``Requires-Dist:
    nvidia-cuda-nvrtc-cu12==12.4.127``). A live error reads the pin from the installed torch's
    metadata and the installed wheel's version from its own; a version torch does not pin is the
    fix (install the pin). For NVRTC, the builtins library its log names says which CUDA
    release's libnvrtc was loaded: another release than the pin's is a libnvrtc from elsewhere
    (a CUDA toolkit on ``LD_LIBRARY_PATH``); the pinned one whose builtins file is missing is a
    damaged install, reinstalled. A pasted message alone names the torch releases that pin the
    CUDA release it names (``cuda_wheel_pins.json``), and no command: the machine is not known.
    Beside a pasted environment (``pasted``: ``collect_env``'s ``[pip3]`` list), the pin is the
    table's for the pasted torch when the paste's torch is PyPI's build of that release, and the
    wheel's version is the one the paste lists.
    """
    facts: list[Fact] = []
    builtins = _BUILTINS.search(text) if library == "nvrtc" else None
    if builtins is not None:
        facts.append(Fact(name="nvrtc_builtins", value=f"CUDA {builtins[1]}.{builtins[2]}",
                          source="message", note="the builtins library NVRTC tried to open"))  # fmt: skip
    if env is None:
        return None, facts, _pinned_by(library, builtins)
    source: Literal["probe", "paste"] = "paste" if pasted else "probe"
    pin = _table_pin(env, CUDA_WHEELS[library]) if pasted else _torch_pin(env, CUDA_WHEELS[library])
    if pin is None:
        unpinned = (
            f"environment: errkb's pins table has no {CUDA_WHEELS[library]}-cuNN pin for the "
            "pasted torch (another release, or not PyPI's CUDA build of it)."
            if pasted
            else f"environment: the installed torch pins no {CUDA_WHEELS[library]}-cuNN wheel "
            "(a conda or source build, or not a Linux wheel): its CUDA libraries are the "
            "toolkit's."
        )
        return None, facts, [unpinned]
    name, pinned = pin
    facts.append(Fact(name="torch_pins", value=f"{name}=={pinned}", source=source,
                      note="cuda_wheel_pins.json" if pasted else "the installed torch's Requires-Dist"))  # fmt: skip
    broken = next(
        (b for b in env.stack.broken if b.distribution.lower() == "torch" and b.required == name),
        None,
    )
    listed = next((d for d in env.stack.distributions if d.name.lower() == name), None)
    present: str | None = None
    if broken is not None:
        present = broken.installed or "not installed"
    elif pasted and listed is not None and listed.version != pinned:
        present = listed.version
    elif pasted and listed is None:
        return None, facts, [f"environment: the paste does not list {name}'s version."]
    torch_version = env.torch.version or "installed"
    if present is not None:
        facts.append(Fact(name="installed_wheel", value=f"{name} {present}", source=source))
        verdict = Verdict(
            code="cuda-wheel-mismatch",
            severity="broken",
            title=f"{name} {present}, where torch {torch_version} pins {pinned}",
            why=f"torch {torch_version} was built and tested against {name} {pinned}; another "
            "release of the library is loaded in its place, and calls into it fail inside the "
            "library.",
            fix=f"Install the {name} release torch pins.",
            commands=(f'pip install "{name}=={pinned}"',),
        )
        return verdict, facts, []
    if builtins is not None and not _same_release(pinned, builtins):
        return None, facts, [
            f"environment: NVRTC looked for the builtins of CUDA {builtins[1]}.{builtins[2]}, "
            f"and torch's {name} {pinned} is of CUDA {'.'.join(pinned.split('.')[:2])}: the "
            "libnvrtc loaded is another CUDA's (a toolkit on LD_LIBRARY_PATH)"
            + _library_path(env)
            + "."
        ]  # fmt: skip
    if builtins is not None and _builtins_missing(env, name, builtins) is True:
        verdict = Verdict(
            code="cuda-wheel-damaged",
            severity="broken",
            title=f"{name} {pinned} is installed without its builtins library",
            why=f"The wheel's lib folder lacks libnvrtc-builtins.so.{builtins[1]}.{builtins[2]}, "
            "which NVRTC loads when it compiles a kernel: the install is incomplete.",
            fix=f"Reinstall {name} {pinned}, the release torch pins.",
            commands=(f'pip install --force-reinstall --no-deps "{name}=={pinned}"',),
        )
        return verdict, facts, []
    return (
        None,
        facts,
        [
            f"environment: {name} {pinned} is installed, the release torch pins; the library "
            "loaded may still be another copy" + _library_path(env) + "."
        ],
    )


def _torch_pin(env: Environment, prefix: str) -> tuple[str, str] | None:
    """The wheel of ``prefix`` (``nvidia-cublas``) the installed torch pins, and its version."""
    pattern = re.compile(rf"^\s*({re.escape(prefix)}-cu\d+)\s*\(?\s*==\s*([\w.]+)", re.IGNORECASE)
    torch = next((d for d in env.stack.distributions if d.name.lower() == "torch"), None)
    for text in torch.requires if torch is not None else ():
        found = pattern.match(text)
        if found is not None:
            return found[1].lower(), found[2]
    return None


def _same_release(pinned: str, builtins: re.Match[str]) -> bool:
    return pinned.split(".")[:2] == [builtins[1], builtins[2]]


def _library_path(env: Environment) -> str:
    value = dict(env.system.variables).get("LD_LIBRARY_PATH")
    return f"; LD_LIBRARY_PATH={value}" if value else ""


def _builtins_missing(env: Environment, name: str, builtins: re.Match[str]) -> bool | None:
    """True when the wheel's folder lacks the builtins library; ``None``: not known."""
    from pathlib import Path

    dist = next((d for d in env.stack.distributions if d.name.lower() == name), None)
    if dist is None or not dist.folder:
        return None
    lib = Path(dist.folder).parent / "nvidia" / "cuda_nvrtc" / "lib"
    if not lib.is_dir():
        return None
    return not (lib / f"libnvrtc-builtins.so.{builtins[1]}.{builtins[2]}").exists()


def _pinned_by(library: str, builtins: re.Match[str] | None) -> list[str]:
    """For a pasted message: the torch releases whose wheel pins the CUDA release it names."""
    from errkb.advisors.environment._tables import tables

    if builtins is None:
        unknown = (
            f"environment: torch's Linux wheels pin their {CUDA_WHEELS[library]}-cuNN release; "
            "pip check (or errkb doctor) on that machine says whether another is installed."
        )
        return [unknown]
    release = [builtins[1], builtins[2]]
    torches = [
        p.torch
        for p in tables().cuda_wheel_pins
        if p.distribution.startswith(CUDA_WHEELS[library]) and p.version.split(".")[:2] == release
    ]
    if not torches:
        return [f"environment: no torch release in errkb's tables pins NVRTC {'.'.join(release)}."]
    named = (
        f"environment: NVRTC {'.'.join(release)} is the release torch {', '.join(torches)} "
        "pin (nvidia-cuda-nvrtc); with another torch, the libnvrtc loaded is not torch's own "
        "(a CUDA toolkit on LD_LIBRARY_PATH)."
    )
    return [named]


# -- a compiled extension module that was never built ---------------------------------------


def extension_not_built(
    env: Environment | None, module: str | None, files: Sequence[str]
) -> Judged:
    """``No module named 'flash_attn_cuda'``: the package is installed, its extension is not.

    The installed distribution that owns the innermost traceback file in site-packages imported
    ``module``; its build did not produce it (a source install without the CUDA toolkit, an
    interrupted build). The command builds that release again against the installed torch.
    """
    from errkb.advisors.environment.verdicts import rebuild_command

    facts: list[Fact] = []
    if module is not None:
        facts.append(Fact(name="missing_module", value=module, source="message"))
    if env is None:
        return None, facts, []
    owner = _site_owner(env, files)
    if owner is None:
        unowned = (
            "environment: no traceback frame in site-packages belongs to an installed "
            "distribution of the stack."
        )
        return None, facts, [unowned]
    facts.append(Fact(name="imported_by", value=f"{owner.name} {owner.version}", source="probe",
                      note=owner.folder))  # fmt: skip
    verdict = Verdict(
        code="extension-not-built",
        severity="broken",
        title=f"{owner.name} {owner.version} is installed without its compiled module {module}",
        why=f"{owner.name}'s Python code imports {module}, its compiled extension, and no such "
        "module is installed: the build that installed it did not compile it.",
        fix=f"Build {owner.name} {owner.version} again against the installed torch (the CUDA "
        "toolkit's nvcc must be on PATH).",
        commands=(rebuild_command(owner.name, owner.version),),
    )
    return verdict, facts, []


def _site_owner(env: Environment, files: Sequence[str]) -> Distribution | None:
    """The stack distribution whose package holds the innermost traceback file in site-packages."""
    for file in reversed(files):
        parts = _SITE.split(file.replace("\\", "/"), maxsplit=1)
        if len(parts) == 1:
            continue
        top = parts[1].split("/", 1)[0].removesuffix(".py").lower()
        for dist in env.stack.distributions:
            if dist.name.lower().replace("-", "_") == top:
                return dist
    return None


# -- xformers' CUTLASS kernels and the GPU ---------------------------------------------------

#: xformers releases whose CUTLASS attention kernels are chosen only below compute capability
#: 9.0 (``80 <= cc && cc < 90`` in xformers/csrc/attention/cuda/fmha/autogen/cutlassF.h at the
#: tags v0.0.17 to v0.0.19; ``cc < 100`` from v0.0.20).
_CUTLASS_BELOW_SM90 = ("0.0.17", "0.0.18", "0.0.19")


def cutlass_kernel(env: Environment | None) -> Judged:
    """``cutlassF: no kernel found to launch!``: an xformers too old for this GPU, or the inputs.

    xformers 0.0.17 to 0.0.19 choose no CUTLASS kernel on a GPU of compute capability 9.0 or
    newer (an H100): the release built for the installed torch is the fix, from errkb's xformers
    table (each release's wheel pins one torch). Otherwise no kernel takes these inputs (their
    head dimension, alignment or dtype) on this GPU, and no command is computed.
    """
    facts: list[Fact] = []
    if env is None:
        return None, facts, []
    xformers = next((d for d in env.stack.distributions if d.name.lower() == "xformers"), None)
    device = env.nvml.devices[0] if env.nvml is not None and env.nvml.devices else None
    if xformers is None or device is None or device.capability is None:
        return None, facts, ["environment: the installed xformers or the GPU is not known."]
    cap = device.capability
    facts.append(
        Fact(name="xformers", value=xformers.version, source="probe", note=xformers.folder)
    )
    facts.append(Fact(name="gpu", value=f"{device.name} (sm_{cap[0]}{cap[1]})", source="probe",
                      note="NVML"))  # fmt: skip
    if xformers.version not in _CUTLASS_BELOW_SM90 or cap < (9, 0):
        inputs = (
            "environment: this xformers chooses CUTLASS kernels for this GPU: none takes these "
            "inputs (their head dimension, alignment or dtype)."
        )
        return None, facts, [inputs]
    row = _xformers_for(env)
    verdict = Verdict(
        code="xformers-too-old-for-gpu",
        severity="broken",
        title=f"xformers {xformers.version} has no CUTLASS kernel for {device.name} "
        f"(sm_{cap[0]}{cap[1]})",
        why=f"xformers {xformers.version} chooses its CUTLASS attention kernels only below compute "
        "capability 9.0; releases from 0.0.20 choose them up to 9.x.",
        fix=(
            f"Install xformers {row.version}, built for the installed torch {row.torch.lstrip('=')}."
            if row is not None
            else "Install an xformers release from 0.0.20 on, built for the installed torch."
        ),
        commands=(f'pip install "xformers=={row.version}"',) if row is not None else (),
        sources=(row.source,) if row is not None else (),
    )
    return verdict, facts, []


def _xformers_for(env: Environment) -> ExtensionBuildRow | None:
    """The newest xformers release in errkb's table whose wheel pins the installed torch."""
    from errkb.advisors.environment._tables import tables

    torch = (env.torch.version or "").split("+", 1)[0]
    rows = [
        r
        for r in tables().extension_builds
        if r.distribution == "xformers" and r.torch == f"=={torch}"
    ]
    return max(rows, key=lambda r: _release_key(r.version)) if rows else None


def _release_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version))


def _table_pin(env: Environment, prefix: str) -> tuple[str, str] | None:
    """The pin of ``prefix``'s wheel for the pasted torch, from ``cuda_wheel_pins.json``.

    Only when the pasted torch is PyPI's build of its release: the CUDA release of that build's
    NVRTC pin (``12.4.127`` is CUDA 12.4) is the pasted ``torch.version.cuda``.
    """
    from errkb.advisors.environment._tables import tables

    release = (env.torch.version or "").split("+", 1)[0]
    rows = [p for p in tables().cuda_wheel_pins if p.torch == release]
    nvrtc = next((p for p in rows if p.distribution.startswith(CUDA_WHEELS["nvrtc"])), None)
    if nvrtc is None or ".".join(nvrtc.version.split(".")[:2]) != env.torch.cuda:
        return None
    row = next((p for p in rows if p.distribution.startswith(prefix + "-cu")), None)
    return (row.distribution, row.version) if row is not None else None
