"""The environment advisor: the doctor's verdict and command when an environment error is raised.

The errors of the machine rather than the program: a GPU whose architecture torch's build has
no code for (torch's warning "... with CUDA capability sm_120 is not compatible with the current
PyTorch installation", then "no kernel image is available for execution on the device"), a
driver older than torch's CUDA runtime ("The NVIDIA driver on your system is too old (found
version 12080)", "CUDA driver version is insufficient for CUDA runtime version"), the CPU build
of torch ("Torch not compiled with CUDA enabled"), and a compiled extension that does not load
(an ``undefined symbol`` of torch's C++ library, a ``libcudart.so.N`` it cannot open).

``errkb doctor`` judges the same situations from the environment's facts
(:mod:`errkb.advisors.environment.verdicts`); this advisor gives its verdict for the error
raised, so the command is the one the doctor prints, computed once:

- a live exception, with probes on: the ``environment`` probe reads this machine (NVML, the
  torch the program imported, the installed distributions) and the message adds what it says
  (the extension that failed, its error); the doctor's verdict of the matching kind is the Fix.
- a pasted message: never this machine's facts. Only what the message says is judged (the
  GPU and its architecture and torch's architectures from the warning, the driver's CUDA
  version from "found version N"), with the knowledge tables; a machine the message does not
  describe is not assumed: what the message leaves out is said, and no command needs it.

Every command is shown, never run.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal

from errkb.advisors import Advice, Captures, Contract, Variant, advisor
from errkb.findings import Fact, Solution

if TYPE_CHECKING:
    from errkb.advisors.environment._model import Verdict
    from errkb.advisors.environment._tables import Tables
    from errkb.evidence import Evidence
    from errkb.match import Match
    from errkb.probes.environment import Environment
    from errkb.probes.extensions import Extension
    from errkb.probes.gpu import NvmlReading
    from errkb.probes.torch_build import TorchBuild

__all__ = ["CONTRACT", "KINDS", "advise"]

CONTRACT = Contract(
    name="environment",
    variants=(
        Variant(name="gpu-arch", requires={"gpu", "sm"}, reads={"archs"}),
        Variant(name="driver", requires={"driver_cuda"}),
        Variant(name="extension", requires={"symbol"}, reads={"path"}),
        Variant(name="cuda-library", requires={"library", "cuda_major"}, reads={"path"}),
        Variant(name="message"),
    ),
)

#: The doctor's verdict codes that answer each kind of error, the likeliest first.
KINDS: dict[str, tuple[str, ...]] = {
    "gpu-arch": ("gpu-arch-unsupported", "gpu-arch-ptx-only"),
    "driver": ("driver-too-old", "driver-minor-compat"),
    "extension": ("extension-other-torch", "extension-fails"),
    "cuda-library": ("extension-other-cuda", "extension-fails"),
    "cpu-torch": ("cpu-torch-with-gpu",),
    "no-cuda": ("cpu-torch-with-gpu", "driver-too-old"),
}

#: The kind of a record whose message captures nothing: the message alone says which it is.
_RECORD_KINDS = {
    "torch-cuda-no-kernel-image": "gpu-arch",
    "torch-nvidia-driver-too-old": "driver",
    "torch-torch-not-compiled-with-cuda": "cpu-torch",
    "torch-rendezvous-port-in-use": "port",
    "torch-dataloader-worker-bus-error": "shm",
    "torch-dataloader-worker-bus-error-printed": "shm",
    "torch-nccl-error": "nccl",
    "numpy-compiled-for-other-numpy": "numpy",
    "numpy-compiled-for-newer-c-api": "numpy",
    "numpy-compiled-for-other-c-abi": "numpy",
    "numpy-dtype-size-changed": "numpy",
    "vllm-compiled-module-missing": "vllm-c",
    "bitsandbytes-native-library-none": "bnb",
    "bitsandbytes-cpu-library-missing-function": "bnb-cpu",
    "bitsandbytes-compiled-without-gpu-support": "bnb-cpu",
    "safetensors-mmap-no-such-device": "mmap",
    "torch-nvrtc-builtins-missing": "nvrtc",
    "torch-cublas-status-execution-failed": "cublas",
    "torch-cublas-status-internal-error": "cublas",
    "torch-cufft-error": "cufft",
    "triton-no-active-driver": "no-cuda",
    "vllm-pynccl-error": "nccl",
    "flash-attn-compiled-module-missing": "module-missing",
    "bitsandbytes-native-library-file-missing": "bnb",
    "xformers-cutlass-no-kernel": "cutlass",
    "torch-nccl-error-detail": "nccl",
    "torch-extension-needs-gpu-build-of-torch": "cpu-torch",
}

#: The kinds no check of the doctor judges: the advisor reads the message, the traceback and
#: the probes itself (:mod:`errkb.advisors.environment._situations`, ``_launch``).
_OWN_KINDS = frozenset(
    {"port", "shm", "nccl", "numpy", "vllm-c", "bnb", "bnb-cpu", "mmap", "nvrtc", "cublas",
     "cufft", "module-missing", "cutlass"}
)  # fmt: skip

#: The libraries of torch's C++ code, by the namespace a mangled symbol starts with.
_NAMESPACES = {"3c10": "c10", "2at": "at (ATen)", "5torch": "torch", "6caffe2": "caffe2"}
_MANGLED = re.compile(r"_ZN?K?(3c10|2at|5torch|6caffe2)")
_SITE = re.compile(r"[/\\](?:site|dist)-packages[/\\]([^/\\]+)")
#: A file under site-packages named in a message (the extension a loader could not load).
_SITE_PATH = re.compile(r"[^\s:'\"]+[/\\](?:site|dist)-packages[/\\][^\s:'\"]+")


@advisor(CONTRACT)
def advise(match: Match, evidence: Evidence) -> Advice | None:
    """The doctor's verdict for this error: on this machine when it was raised here."""
    variant = CONTRACT.variant_for(match.captures)
    if variant is None:
        return None
    kind = _RECORD_KINDS.get(match.record.id) if variant.name == "message" else variant.name
    if kind is None:
        return None
    caps = Captures(match.captures)
    if kind == "no-cuda" and caps.integer("active") != 0:
        return None  # two backends active: not a machine without CUDA
    live = _live(evidence)
    if kind in _OWN_KINDS:
        return _situation(kind, caps, evidence, live=live)
    facts = _message_facts(kind, caps)
    if not live:  # report tools' output in the paste: judged for the machine it describes
        pasted = _from_paste(kind, caps, facts, evidence)
        if pasted is not None:
            return pasted
    env = evidence.probe("environment") if live else None
    if env is None:
        return _from_message(kind, caps, facts, live=live)
    files = [view.file for view in evidence.frames()]
    return _from_machine(kind, caps, env, facts, files)


def _live(evidence: Evidence) -> bool:
    """True for an exception raised in this process; a pasted text is another machine's."""
    return evidence.text is None and next(iter(evidence.frames()), None) is not None


def _message_facts(kind: str, caps: Captures) -> list[Fact]:
    facts: list[Fact] = []
    if kind == "gpu-arch" and caps.text("gpu") is not None:
        facts.append(Fact(name="gpu", value=caps.text("gpu"), source="message"))
        facts.append(Fact(name="gpu_architecture", value=f"sm_{caps.text('sm')}", source="message"))
        if caps.text("archs") is not None:
            facts.append(
                Fact(name="torch_architectures", value=caps.text("archs"), source="message")
            )
    elif kind == "driver" and caps.integer("driver_cuda") is not None:
        found = caps.integer("driver_cuda") or 0
        facts.append(
            Fact(name="driver_cuda", value=f"{found // 1000}.{found % 1000 // 10}", source="message",
                 note=f"the newest CUDA the driver runs: 'found version {found}' (cudaDriverGetVersion)")
        )  # fmt: skip
    elif kind == "extension" and caps.text("symbol") is not None:
        symbol = caps.text("symbol") or ""
        facts.append(Fact(name="undefined_symbol", value=symbol, source="message"))
        owner = _MANGLED.match(symbol)
        if owner is not None:
            facts.append(
                Fact(name="symbol_library", value=f"torch's C++ library ({_NAMESPACES[owner[1]]})",
                     source="computed", note="the namespace the mangled name starts with")
            )  # fmt: skip
    elif kind == "cuda-library" and caps.text("library") is not None:
        facts.append(Fact(name="missing_library", value=caps.text("library"), source="message"))
        facts.append(
            Fact(name="library_cuda_major", value=caps.integer("cuda_major"), source="message",
                 note="the CUDA major release its soname names")
        )  # fmt: skip
    return facts


# -- a pasted message: what it says, and the tables ----------------------------------------


def _from_message(kind: str, caps: Captures, facts: list[Fact], *, live: bool) -> Advice | None:
    from errkb.advisors.environment._tables import tables

    why = (
        "the environment probe did not run (probes are off)"
        if live
        else "a pasted message is judged by what it says, never by this machine's facts"
    )
    known = tables()
    verdict: Verdict | None = None
    notes = [f"environment: {why}."]
    if kind == "gpu-arch" and caps.text("gpu") is not None:
        verdict, more = _pasted_arch(caps, known)
        notes += more
    elif kind == "driver" and caps.integer("driver_cuda") is not None:
        verdict, more = _pasted_driver(caps.integer("driver_cuda") or 0, known)
        notes += more
    if verdict is None:
        return Advice(facts=tuple(facts), notes=tuple(notes)) if facts else None
    return _advice(verdict, facts, notes)


def _quoted(nvml: NvmlReading, torch: TorchBuild | None = None) -> Environment:
    """An environment of only what a message says: no machine, no installed set."""
    from errkb.probes.environment import Environment
    from errkb.probes.stack import StackReading
    from errkb.probes.system import SystemReading
    from errkb.probes.torch_build import TorchBuild

    return Environment(
        system=SystemReading(
            os="", machine="", glibc=None, python="", abi=None, executable="",
            memory_bytes=None, shm_bytes=None, container=None, variables=(), hf_cache="",
            hf_cache_free_bytes=None,
        ),
        nvml=nvml,
        nvml_error=None,
        torch=torch or TorchBuild(installed=True, error="not in the message", source="the message"),
        stack=StackReading(distributions=(), checked=0, broken=(), source="the message"),
    )  # fmt: skip


def _pasted_arch(caps: Captures, known: Tables) -> tuple[Verdict | None, list[str]]:
    from errkb.advisors.environment._tables import capability
    from errkb.advisors.environment.verdicts import judge
    from errkb.probes import GpuDevice
    from errkb.probes.gpu import NvmlReading
    from errkb.probes.torch_build import TorchBuild

    try:
        cap = capability(f"sm_{caps.text('sm')}")
    except ValueError:
        return None, []
    archs = tuple((caps.text("archs") or "").split())
    if not archs:
        return None, ["environment: the message lists no architectures of torch's build."]
    device = GpuDevice(index=0, name=caps.text("gpu") or "", total_bytes=0, capability=cap)
    env = _quoted(
        NvmlReading(library="the message", driver_version=None, cuda_driver_version=None,
                    devices=(device,)),
        TorchBuild(installed=True, archs=archs, error="its version and CUDA are not in the "
                   "message", source="the message"),
    )  # fmt: skip
    verdict = _first(judge(env, known), KINDS["gpu-arch"])
    notes = [
        (
            "environment: the message does not say the machine (x86_64 assumed) or the driver; "
            "the build chosen is the newest the tables list for this GPU."
        )
    ]
    return verdict, notes + _driver_note(verdict, known)


def _pasted_driver(
    found: int, known: Tables, pasted: Environment | None = None
) -> tuple[Verdict | None, list[str]]:
    """'found version N' alone: the build this driver runs, and the driver the next CUDA needs.

    ``pasted``: the machine a paste's report tools describe, when they say the driver's version
    and the OS but not enough for the doctor's check (no GPU listed, or torch not named).
    """
    from errkb._attrs import attrs
    from errkb.advisors.environment._model import Verdict
    from errkb.advisors.environment.verdicts import (
        best_build,
        install_torch_command,
        needed_driver,
        system_of,
    )
    from errkb.probes.gpu import NvmlReading

    driver = pasted.nvml.driver_version if pasted is not None and pasted.nvml else None
    nvml = NvmlReading(
        library="the message", driver_version=driver, cuda_driver_version=found, devices=()
    )
    env = _quoted(nvml)
    if pasted is not None:
        env = attrs.evolve(env, system=pasted.system)
    row = best_build(known, env, None, None)
    cuda = f"{found // 1000}.{found % 1000 // 10}"
    notes = [
        (
            "environment: the message does not say the GPU or torch's CUDA; the build chosen is "
            f"the newest the tables list for CUDA {cuda} or older, on x86_64."
        )
    ]
    if row is None:
        return None, notes
    newer = known.driver_row(str(found // 1000 + 1))
    needed = needed_driver(newer, system_of(env))
    beyond = (
        f"; a torch built for CUDA {found // 1000 + 1} needs a driver {needed} (NVIDIA's minimum "
        "under minor version compatibility)"
        if needed
        else ""
    )
    verdict = Verdict(
        code="driver-too-old",
        severity="broken",
        title=f"The NVIDIA driver runs CUDA {cuda} at most, older than torch's CUDA runtime",
        why=f"cudaDriverGetVersion() gave {found}: the driver{' ' + driver if driver else ''} "
        f"runs CUDA {cuda} and older in "
        f"full, and the rest of CUDA {found // 1000}.x under minor version compatibility{beyond}.",
        fix=f"Install torch {row.torch} built for CUDA {row.cuda}, which this driver runs, or "
        f"upgrade the NVIDIA driver{' to one ' + needed if needed else ''}.",
        commands=(install_torch_command(env, row),),
        sources=(row.source, *((newer.source,) if newer is not None and needed else ())),
    )
    return verdict, notes


def _driver_note(verdict: Verdict | None, known: Tables) -> list[str]:
    """What driver the chosen build needs, when the message did not say the driver."""
    from errkb.advisors.environment.verdicts import needed_driver

    if verdict is None or not verdict.commands:
        return []
    label = re.search(r"/cu(\d+)(\d)$", verdict.commands[0])
    if label is None:
        return []
    needed = needed_driver(known.driver_row(f"{label[1]}.{label[2]}"))
    return [f"environment: that build needs an NVIDIA driver {needed}."] if needed else []


# -- a live exception: this machine ----------------------------------------------------------


def _from_machine(
    kind: str,
    caps: Captures,
    env: Environment,
    facts: list[Fact],
    files: list[str],
    source: Literal["probe", "paste"] = "probe",
) -> Advice | None:
    from errkb._attrs import attrs
    from errkb.advisors.environment.verdicts import extension_verdict, judge

    facts = facts + _machine_facts(env, source)
    if kind in ("extension", "cuda-library"):
        ext = _failed_extension(kind, caps, env, files)
        if ext is None:
            unknown = (
                "environment: no file of an installed distribution in the message or traceback."
            )
            return Advice(facts=tuple(facts), notes=(unknown,))
        env = attrs.evolve(env, extensions=(ext,))
        verdicts: tuple[Verdict, ...] = (extension_verdict(env, _known(), ext),)
    else:
        verdicts = judge(env, _known())
    verdict = _first(verdicts, KINDS[kind])
    if verdict is None:
        return Advice(facts=tuple(facts)) if facts else None
    return _advice(verdict, facts, [])


def _known() -> Tables:
    from errkb.advisors.environment._tables import tables

    return tables()


def _machine_facts(env: Environment, source: Literal["probe", "paste"] = "probe") -> list[Fact]:
    facts = []
    if env.nvml is not None:
        read = "NVML" if source == "probe" else env.nvml.library
        for device in env.nvml.devices[:1]:
            cap = device.capability
            shown = f"{device.name} (sm_{cap[0]}{cap[1]})" if cap else device.name
            facts.append(Fact(name="gpu", value=shown, source=source, note=read))
        if env.nvml.driver_version:
            facts.append(Fact(name="driver", value=env.nvml.driver_version, source=source,
                              note=read))  # fmt: skip
    if env.torch.version:
        build = f"CUDA {env.torch.cuda}" if env.torch.cuda else env.torch.error or "no CUDA"
        facts.append(Fact(name="torch", value=f"{env.torch.version} ({build})", source=source,
                          note=env.torch.source))  # fmt: skip
    return facts


def _failed_extension(
    kind: str, caps: Captures, env: Environment, files: list[str]
) -> Extension | None:
    """The extension that failed, as the doctor's extension probe would report it.

    Its distribution owns the file the message names, or else the innermost frame of the
    traceback that is in an installed distribution (the module that imported it).
    """
    from errkb.probes.extensions import Extension

    path = caps.text("path")
    owner = None
    for candidate in ([path] if path else []) + files:
        owner = _owner(candidate, env)
        if owner is not None:
            break
    if owner is None:
        return None
    if kind == "extension":
        name = (path or "").replace("\\", "/").rsplit("/", 1)[-1].split(".", 1)[0]
        error = f"{path or name}: undefined symbol: {caps.text('symbol')}"
    else:
        name = caps.text("library") or ""
        error = f"{name}: cannot open shared object file: No such file or directory"
    return Extension(
        distribution=owner[0], version=owner[1], kind="module", name=name or owner[0],
        path=path or "", error=error, source="the exception's message and traceback",
    )  # fmt: skip


def _owner(path: str, env: Environment) -> tuple[str, str] | None:
    """The installed distribution a file in site-packages belongs to: by its top folder.

    A path relative to site-packages (``torchaudio/lib/libtorchaudio.so``, as a record's
    pattern captures it) is read from its first folder.
    """
    site = _SITE.search(path)
    relative = path.replace("\\", "/")
    if site is not None:
        first = site[1]
    elif "/" in relative and not relative.startswith(("/", ".", "~")):
        first = relative.split("/", 1)[0]
    else:
        return None
    top = first.split(".", 1)[0].lower()
    best: tuple[str, str] | None = None
    for dist in env.stack.distributions:
        name = dist.name.lower().replace("-", "_")
        if (top == name or top.startswith(name + "_")) and (
            best is None or len(name) > len(best[0])
        ):
            best = (dist.name, dist.version)
    return best


# -- the errors no check of the doctor judges ------------------------------------------------


def _situation(kind: str, caps: Captures, evidence: Evidence, *, live: bool) -> Advice | None:
    """A busy port, a small /dev/shm, NCCL, numpy's ABI, vLLM's _C, a CUDA library wheel."""
    from errkb.advisors.environment import _situations

    env = evidence.probe("environment") if live else None
    if live and env is None:
        why = "environment: the environment probe did not run (probes are off)."
    else:
        why = (
            "environment: a pasted message is judged by what it says, never by this machine's "
            "facts."
        )
    text = evidence.text if evidence.text is not None else _messages(evidence)
    frames = [frame for info in evidence.infos for frame in info.frames]
    judged: _situations.Judged | None
    if kind == "port":
        launch = evidence.probe("launch") if live else None
        judged = _situations.port(caps, text, launch, [f.function for f in frames], live=live)
    elif kind in ("shm", "nccl"):
        judged = _situations.shared_memory(kind, text, env)
    elif kind == "numpy":
        judged = _situations.numpy_abi(caps, env, [f.file for f in frames])
    elif kind in ("bnb", "bnb-cpu"):
        pasted = None if live else _pasted_machine(evidence)
        loaded = kind == "bnb-cpu"
        if pasted is not None:
            judged = _situations.native_library(pasted, text, source="paste", loaded=loaded)
        else:
            judged = _situations.native_library(env, text, loaded=loaded)
    elif kind == "mmap":
        judged = _situations.mapped_path(_mapped(evidence) if live else None)
    elif kind in _situations.CUDA_WHEELS:
        pasted = None if live else _pasted_machine(evidence)
        judged = _situations.cuda_wheel(kind, text, pasted or env, pasted=pasted is not None)
    elif kind == "cutlass":
        judged = _situations.cutlass_kernel(env)
    elif kind == "module-missing":
        files = [f.file for f in frames]
        judged = _situations.extension_not_built(env, caps.text("module"), files)
    else:
        judged = _situations.compiled_module(env, [f.file for f in frames])
    if judged is None:
        return None
    verdict, facts, notes = judged
    if env is None:
        notes = [why, *notes]
    if verdict is None:
        return Advice(facts=tuple(facts), notes=tuple(notes)) if facts or notes else None
    return _advice(verdict, list(facts), list(notes))


def _pasted_machine(evidence: Evidence) -> Environment | None:
    """The machine a paste's report tools describe, completed from the tables; ``None``: none."""
    from errkb.advisors.environment._pasted import completed

    reading = evidence.probe("pasted-environment")
    return completed(reading, _known()) if reading is not None else None


def _mapped(evidence: Evidence) -> str | None:
    """The file ``safe_open`` was given: a local of the innermost frame that names one.

    ``filename`` in safetensors' ``load_file``, ``checkpoint_file`` in transformers'
    ``load_state_dict``, ``path`` elsewhere.
    """
    import os

    for name in ("filename", "checkpoint_file", "path"):
        value = evidence.find_local(name, lambda v: isinstance(v, (str, os.PathLike)))
        if value is not None:
            return str(os.fspath(value))
    return None


def _messages(evidence: Evidence) -> str:
    """The raised exceptions' messages, one a line: what a live error says."""
    return "\n".join(info.message for info in evidence.infos)


# -- a pasted error beside report tools' output: the machine they describe ------------------


def _from_paste(kind: str, caps: Captures, facts: list[Fact], evidence: Evidence) -> Advice | None:
    """The verdict for the machine a paste's report tools describe (``pasted-environment``).

    ``None`` when the paste holds no report tool's output: the message alone is judged then.
    What the message says is added to what the tools said
    (:func:`errkb.advisors.environment._pasted.with_message`); "no kernel image" on a GPU whose
    build's architectures are unknown is judged from the error itself.
    """
    from errkb._attrs import attrs
    from errkb.advisors.environment._pasted import completed, no_kernel_verdict, with_message

    reading = evidence.probe("pasted-environment")
    if reading is None:
        return None
    known = _known()
    env = with_message(completed(reading, known), kind, caps)
    files = [f.file for info in evidence.infos for f in reversed(info.frames)]
    files += [m[0] for info in evidence.infos for m in _SITE_PATH.finditer(info.message)]
    advice = _from_machine(kind, caps, env, facts, files, source="paste")
    found = caps.integer("driver_cuda")
    if (advice is None or not advice.solutions) and kind == "driver" and found:
        verdict, _ = _pasted_driver(found, known, env)
        if verdict is not None:
            advice = _advice(verdict, facts + _machine_facts(env, "paste"), [])
    if (advice is None or not advice.solutions) and kind == "gpu-arch" and not env.torch.archs:
        verdict = no_kernel_verdict(env, known)
        if verdict is not None:
            advice = _advice(verdict, facts + _machine_facts(env, "paste"), [])
    notes = (
        f"environment: judged for the machine {reading.source} describes, never this one's.",
        *(f"environment: {note}." for note in reading.notes),
    )
    if advice is None:
        return Advice(facts=tuple(facts + _machine_facts(env, "paste")), notes=notes)
    return attrs.evolve(advice, notes=notes + advice.notes)


# -- the verdict as advice -------------------------------------------------------------------


def _first(verdicts: tuple[Verdict, ...], codes: tuple[str, ...]) -> Verdict | None:
    for code in codes:
        for verdict in verdicts:
            if verdict.code == code:
                return verdict
    return None


def _advice(verdict: Verdict, facts: list[Fact], notes: list[str]) -> Advice:
    """The verdict's fix and command first; its title and reasons as facts."""
    text = verdict.fix
    settings: dict[str, object] = {}
    if verdict.commands:
        command = " && ".join(verdict.commands)
        text += f" Run: {command}"
        settings["command"] = command
    facts = [
        *facts,
        Fact(name="verdict", value=verdict.title, source="computed",
             note=f"{verdict.code}: {verdict.why}"),
        *(Fact(name="table_row", value=s, source="computed", note="errkb's knowledge tables")
          for s in verdict.sources),
    ]  # fmt: skip
    return Advice(
        solutions=(Solution(text=text, settings=settings),),
        facts=tuple(facts),
        notes=tuple(notes),
        placement="before",
        # The record's example names another build; the command computed here is the fix.
        withhold_example=bool(verdict.commands),
    )
