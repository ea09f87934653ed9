"""A pasted environment: the facts an issue's report tools printed, read back as an environment.

People who report an error paste, beside the traceback, what a report tool printed about their
machine: ``python -m torch.utils.collect_env``, ``vllm collect-env`` (torch's fields, then
vLLM's), ``accelerate env``, ``transformers env`` (``transformers-cli env``), ``nvidia-smi``
(its table or ``-q``), DeepSpeed's ``ds_report`` (torch's build, nvcc, DeepSpeed's version and
which ops are installed and compatible), ``python -m bitsandbytes`` (its version, the CUDA it
set up for, the native library it loaded or failed to) and ``pip check`` (the requirements the
installed set breaks, which become the stack's broken requirements). :func:`read_pasted` finds those outputs in a text and reads their versions,
GPUs, driver and CUDA into an :class:`~errkb.probes.environment.Environment`, the same type the
doctor reads from this machine, so that the same verdicts judge the reporter's machine. Nothing
of this machine is mixed in: what the paste does not say stays unknown (``None``, or an
``error`` that says it is not in the paste).

The text is data, read line by line with bounded patterns, never run. It is read as people
paste it: inside Markdown code fences or ``<details>``, behind GitHub's ``> `` quote marks, as a
Markdown list (``- key: value``), with a value wrapped onto the next line (``GPU models and
configuration:`` then one ``GPU n: name`` line per GPU), and with nvidia-smi's table cut short.

``probe`` is the ``pasted-environment`` built-in probe: the pasted text of an ``errkb explain``
(:attr:`errkb.evidence.Evidence.text`) read this way; ``None`` for a live exception, whose
machine is this one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from errkb._attrs import attrs
from errkb._patterns import lazy_compile

if TYPE_CHECKING:
    from errkb.evidence import Evidence
    from errkb.probes.environment import Environment
    from errkb.probes.extensions import Extension
    from errkb.probes.gpu import NvmlReading
    from errkb.probes.stack import Broken, StackReading
    from errkb.probes.system import SystemReading
    from errkb.probes.torch_build import TorchBuild

__all__ = ["TOOLS", "PastedEnvironment", "PastedFact", "probe", "read_pasted"]

#: The report tools whose output is read, as they are named in facts and notes.
TOOLS = (
    "collect_env",
    "vllm collect-env",
    "accelerate env",
    "transformers env",
    "nvidia-smi",
    "ds_report",
    "python -m bitsandbytes",
    "pip check",
)

#: The longest line read; report tools print short lines, a longer one is not theirs.
_MAX_LINE = 2000
#: The most lines read: a report tool's output is a few hundred lines.
_MAX_LINES = 20000

_MIB = 1 << 20


@attrs.frozen(kw_only=True)
class PastedFact:
    """One value a report tool printed: its name, the value as printed, the tool, the line."""

    name: str
    value: str
    tool: str
    line: int


@attrs.frozen(kw_only=True)
class PastedEnvironment:
    """The environment a paste describes, the facts it was read from, and what was unclear.

    ``tools`` are the report tools found (:data:`TOOLS`), in the order first seen; ``notes``
    say what the paste leaves open (two values for one fact: the last is used).
    """

    environment: Environment
    tools: tuple[str, ...]
    facts: tuple[PastedFact, ...]
    notes: tuple[str, ...] = ()

    @property
    def source(self) -> str:
        """Where the facts came from, in words: ``the paste (collect_env, nvidia-smi)``."""
        return f"the paste ({', '.join(self.tools)})"


# -- reading lines -------------------------------------------------------------------------

_QUOTE = lazy_compile(r"^(?:[ \t]{0,3}>[ ]?)+")
_FENCE = lazy_compile(r"^\s*(?:`{3,}|~{3,})")
_HTML = lazy_compile(r"(?i)^\s*</?(?:details|summary)\b[^>]*>(?:.*</summary>)?\s*$")
# A "key: value" line, as a list item or padded: accelerate's, collect_env's, vLLM's.
_PAIR = lazy_compile(
    r"^[ \t]*(?:[-*][ \t]+)?(?P<key>[A-Za-z`\[][^:]{0,60}?)[ \t]*:[ \t]*(?P<value>.*)$"
)
_PIP = lazy_compile(r"^\s*\[(?:pip3?|uv)\]\s+(?P<name>[A-Za-z0-9][\w.\-]*)\s*==\s*(?P<version>\S+)")
_CONDA = lazy_compile(
    r"^\s*\[conda\]\s+(?P<name>[A-Za-z0-9][\w.\-]*)\s+(?P<version>\d[\w.+!\-]*)(?:\s|$)"
)
_GPU_LINE = lazy_compile(r"^\s*GPU (?P<index>\d{1,3}): (?P<name>\S.*?)\s*(?:\(UUID: [^)]*\))?\s*$")
_SMI_HEADER = lazy_compile(r"NVIDIA-SMI \d[\w.\-]*")
_SMI_DRIVER = lazy_compile(r"Driver Version:\s*(?P<driver>\d+(?:\.\d+)+)")
_SMI_CUDA = lazy_compile(r"CUDA Version:\s*(?P<cuda>\d+\.\d+)")
_SMI_ROW = lazy_compile(
    r"^\|\s+(?P<index>\d{1,3})\s+(?P<name>\S.*?)\s+(?:On|Off)\s*\|\s*[0-9A-Fa-f]{4,8}:[0-9A-Fa-f:.]+"
)
_SMI_MEMORY = lazy_compile(r"\|\s*(?P<used>\d+)MiB\s*/\s*(?P<total>\d+)MiB\s*\|")
_SMI_PROCESS = lazy_compile(
    r"^\|\s+(?P<gpu>\d{1,3})\s+(?:\S+\s+\S+\s+)?(?P<pid>\d+)\s+(?:C|G|C\+G|M|M\+C)\s+"
    r"(?P<name>\S.*?)\s+(?P<used>\d+)MiB\s*\|"
)
_CAPABILITY_WARNING = lazy_compile(
    r"(?P<gpu>\S.*?) with CUDA capability sm_(?P<sm>\d{2,3}) is not compatible with the current "
    r"PyTorch installation"
)
_ARCHS = lazy_compile(
    r"The current PyTorch install supports CUDA capabilities (?P<archs>(?:sm_\d+a?\s*)+)"
)
_CUDA_VERSION = lazy_compile(r"\d+\.\d+(?:\.\d+)?")
_CU_LABEL = lazy_compile(r"\+cu(?P<digits>\d{3,4})\b")
_TORCH_ONLY = lazy_compile(r"^(?P<version>\d+\.\d+[\w.+!\-]*)(?:\s+\((?P<gpu>[^)]*)\))?")
_MACHINE = lazy_compile(r"(?P<machine>x86_64|aarch64|arm64|AMD64|ppc64le|s390x)")
_GLIBC = lazy_compile(r"glibc[-_ ]?(?P<glibc>\d+\.\d+)")
# vLLM's collect-env: its own fields, its banners ("PyTorch Info", "CUDA / GPU Info"), its log.
_VLLM = lazy_compile(
    r"^\s*(?:vLLM Version\s*:|vLLM Build Flags|(?:System|PyTorch|CUDA / GPU|vLLM) Info\s*$)"
    r"|Automatically detected platform"
)
# collect_env's first field, as it prints it (a hand-written "PyTorch Version:" is not it).
_COLLECT_ENV = lazy_compile(r"^PyTorch version\s*:")
_RAM = lazy_compile(r"^(?P<amount>\d+(?:\.\d+)?)\s*GB$")
# pip check: "vllm 0.6.3 has requirement torch==2.4.0, but you have torch 2.5.1." and
# "transformers 4.46.0 requires tokenizers, which is not installed." (pip names only the project).
_PIP_CHECK_OTHER = lazy_compile(
    r"^(?P<dist>[A-Za-z0-9][\w.\-]*) (?P<version>\S+) has requirement (?P<req>\S.*?), but you "
    r"have (?P<name>[A-Za-z0-9][\w.\-]*) (?P<installed>\S+?)\.?$"
)
_PIP_CHECK_MISSING = lazy_compile(
    r"^(?P<dist>[A-Za-z0-9][\w.\-]*) (?P<version>\S+) requires (?P<req>\S.*?), which is not "
    r"installed\.?$"
)
_PIP_CHECK_CLEAN = lazy_compile(r"^No broken requirements found\.$")
_REQUIRED_NAME = lazy_compile(r"^[A-Za-z0-9][\w.\-]*")
# ds_report: its banners, "key ..... value" fields and "op ..... [YES] ..... [OKAY]" rows.
_DS_BANNER = lazy_compile(
    r"DeepSpeed C\+\+/CUDA extension op report|DeepSpeed general environment info:"
)
_DS_FIELD = lazy_compile(r"^(?P<key>[a-z][a-z .]*?[a-z.]) \.{3,} (?P<value>\S.*)$")
_DS_OP = lazy_compile(
    r"^(?P<op>[a-z][a-z0-9_]*) [ .]*\[(?P<installed>YES|NO)\] [ .]*\[(?P<compatible>OKAY|NO)\]"
)
#: ds_report's fields -> fact names.
_DS_KEYS = {
    "torch version": "torch",
    "torch cuda version": "torch cuda",
    "torch hip version": "torch rocm",
    "nvcc version": "nvcc",
    "deepspeed info": "deepspeed",
    "deepspeed wheel compiled w.": "deepspeed built with",
}
# python -m bitsandbytes: its banners and CUDA SETUP lines, old (0.3x-0.41) and new forms.
_BNB = lazy_compile(
    r"Welcome to bitsandbytes|CUDA SETUP:|bitsandbytes library load error|Could not (?:load|find) "
    r"the bitsandbytes|Could not load bitsandbytes native library|=+ bitsandbytes v\d"
    r"|BNB_CUDA_VERSION=\d+ environment variable detected"
)
_BNB_BINARY = lazy_compile(
    r"(?:^bin |CUDA SETUP: Loading binary |^binary_path: )"
    r"(?P<path>\S*?libbitsandbytes[\w.\-]*?\.(?:so|dll|dylib))"
)
_BNB_CUDA = lazy_compile(
    r"CUDA SETUP: Detected CUDA version (?P<cuda>\d{2,3})\b"
    r"|PyTorch settings found: CUDA_VERSION=(?P<setting>\d{2,3})\b"
)
_BNB_OVERRIDE = lazy_compile(r"\bBNB_CUDA_VERSION=(?P<cuda>\d{2,3}) environment variable detected")
_BNB_MISSING = lazy_compile(
    r"Could not find the bitsandbytes CUDA binary at (?:\w+Path\(')?(?P<path>[^\s')]+)"
)
_BNB_CAPABILITY = lazy_compile(
    r"Highest compute capability among GPUs detected: (?P<cc>\d+\.\d+)"
    r"|Highest Compute Capability: \((?P<major>\d+), (?P<minor>\d+)\)"
)
_BNB_VERSION = lazy_compile(r"bitsandbytes(?:-| v)(?P<version>\d+\.\d+\.\d+[\w.]*?)(?:-py|[\s/]|$)")
_BNB_FAILED = lazy_compile(
    r"Could not load bitsandbytes native library: (?P<error>\S.*)"
    r"|bitsandbytes library load error: (?P<detail>\S.*)"
    r"|CUDA SETUP: (?P<setup>Setup Failed!|CUDA detection failed!)"
)
_BNB_CPU = lazy_compile(r"compiled without GPU support")

#: Keys of the report tools, normalised (lower case, no backticks, single spaces) -> fact name.
_KEYS = {
    "pytorch version": "torch",
    "pytorch version (gpu?)": "torch",
    "pytorch version (accelerator?)": "torch",
    "cuda used to build pytorch": "torch cuda",
    "rocm used to build pytorch": "torch rocm",
    "is cuda available": "cuda available",
    "cuda runtime version": "cuda toolkit",
    "gpu models and configuration": "gpus",
    "nvidia driver version": "driver",
    "driver version": "driver",
    "cuda version": "driver cuda",
    "gpu type": "gpus",
    "os": "os",
    "platform": "platform",
    "python platform": "platform",
    "python version": "python",
    "libc version": "glibc",
    "system ram": "memory",
    "numpy version": "numpy",
    "transformers version": "transformers",
    "accelerate version": "accelerate",
    "huggingface_hub version": "huggingface_hub",
    "safetensors version": "safetensors",
    "deepspeed version": "deepspeed",
    "vllm version": "vllm",
    "pytorch accelerator": "torch accelerator",
}

#: Facts that name an installed distribution, and that distribution.
_DISTS = {
    "numpy": "numpy",
    "transformers": "transformers",
    "accelerate": "accelerate",
    "huggingface_hub": "huggingface_hub",
    "safetensors": "safetensors",
    "deepspeed": "deepspeed",
    "vllm": "vllm",
    "bitsandbytes": "bitsandbytes",
}

#: Values that say the tool could not tell.
_UNKNOWN = ("could not collect", "n/a", "na", "not installed", "not found", "none", "<fill in>", "")


#: The facts each tool prints (the rest of a tool's keys are its own, or the user's words).
_OWN = {
    "accelerate env": {"torch", "torch accelerator", "gpus", "platform", "python", "numpy",
                       "accelerate", "memory"},
    "transformers env": {"torch", "gpus", "platform", "python", "transformers", "huggingface_hub",
                         "safetensors", "accelerate", "deepspeed"},
    "nvidia-smi": {"driver", "driver cuda"},
}  # fmt: skip


def _belongs(name: str, tool: str) -> bool:
    """True when ``tool`` prints fact ``name`` (collect_env's and vLLM's: all but nvidia-smi's)."""
    own = _OWN.get(tool)
    if own is None:
        return name not in ("driver cuda", "memory")
    return name in own


def _key(raw: str) -> str:
    return " ".join(raw.replace("`", "").split()).lower()


def _known(value: str) -> bool:
    return value.strip().lower() not in _UNKNOWN


def _lines(text: str) -> list[str]:
    """The text's lines without quote marks, colour codes, fences and ``<details>`` tags."""
    from errkb.parse import normalise

    out = []
    for raw in normalise(text).splitlines()[:_MAX_LINES]:
        line = raw[:_MAX_LINE].rstrip()
        line = _QUOTE.sub("", line)
        if _FENCE.match(line) or _HTML.match(line):
            line = ""
        out.append(line)
    return out


class _Reader:
    """The facts of one paste, in the order printed; the tool each came from."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.facts: list[PastedFact] = []
        self.tools: list[str] = []
        self.vllm = any(_VLLM.search(line) for line in lines)

    def add(self, name: str, value: str, tool: str, index: int) -> None:
        self.facts.append(PastedFact(name=name, value=value.strip(), tool=tool, line=index + 1))
        if tool not in self.tools:
            self.tools.append(tool)

    def read(self) -> None:
        tool: str | None = None
        for index, line in enumerate(self.lines):
            tool = self._tool_of(line, tool)
            if self._smi(line, index) or self._warning(line, index) or self._pip_check(line, index):
                continue
            if tool == "ds_report" and self._ds_report(line, index):
                continue
            if tool == "python -m bitsandbytes":
                self._bitsandbytes(line, index)
                continue
            if tool is None:
                continue
            pip = _PIP.match(line) or _CONDA.match(line)
            if pip is not None:
                self.add(f"dist {pip['name']}", pip["version"], tool, index)
                continue
            pair = _PAIR.match(line)
            name = _KEYS.get(_key(pair["key"])) if pair is not None else None
            if pair is None or name is None or not _belongs(name, tool):
                continue
            value = pair["value"]
            if name == "gpus":
                self._gpus(value, index, tool)
            elif name in ("driver", "driver cuda") and tool == "nvidia-smi":
                self.add(name, value.split()[0] if value.split() else "", tool, index)
            else:
                self.add(name, value, tool, index)

    def _torch_tool(self) -> str:
        return "vllm collect-env" if self.vllm else "collect_env"

    def _tool_of(self, line: str, tool: str | None) -> str | None:
        """The tool whose output ``line`` starts, else the one before it."""
        listed = line.lstrip().startswith(("-", "*"))  # accelerate's and transformers' lists
        if "`Accelerate` version:" in line:  # transformers env says "Accelerate version:"
            return "accelerate env"
        if "`transformers` version:" in line:
            return "transformers env"
        if line.startswith("Collecting environment information") or (
            not listed and _COLLECT_ENV.match(line)
        ):
            return self._torch_tool()
        if "NVSMI LOG" in line or _SMI_HEADER.search(line):
            return "nvidia-smi"
        if _DS_BANNER.search(line) or (tool is None and _DS_OP.match(line)):  # a cut ds_report
            return "ds_report"
        if _BNB.search(line):
            return "python -m bitsandbytes"
        if tool is None and (_PIP.match(line) or _VLLM.search(line)):  # a cut collect-env
            return self._torch_tool()
        return tool

    def _gpus(self, value: str, index: int, tool: str) -> None:
        """``GPU 0: name`` on this line or the lines after it; else the value is one name."""
        found = False
        for offset, line in enumerate([value, *self.lines[index + 1 : index + 65]]):
            gpu = _GPU_LINE.match(line)
            if gpu is None:
                if offset == 0 or not line.strip():
                    continue
                break
            found = True
            self.add(f"gpu {gpu['index']}", gpu["name"], tool, index + offset)
        if not found and _known(value):
            self.add("gpu 0", value, tool, index)

    def _smi(self, line: str, index: int) -> bool:
        if _SMI_HEADER.search(line) or ("Driver Version:" in line and "|" in line):
            driver, cuda = _SMI_DRIVER.search(line), _SMI_CUDA.search(line)
            if driver is not None:
                self.add("driver", driver["driver"], "nvidia-smi", index)
            if cuda is not None:
                self.add("driver cuda", cuda["cuda"], "nvidia-smi", index)
            if _SMI_HEADER.search(line) and "nvidia-smi" not in self.tools:
                self.tools.append("nvidia-smi")
            return True
        row = _SMI_ROW.match(line)
        if row is not None:
            self.add(f"gpu {row['index']}", row["name"], "nvidia-smi", index)
            for later in self.lines[index + 1 : index + 3]:
                memory = _SMI_MEMORY.search(later)
                if memory is not None:
                    self.add(f"gpu {row['index']} memory", memory["total"], "nvidia-smi", index + 1)
                    self.add(f"gpu {row['index']} used", memory["used"], "nvidia-smi", index + 1)
                    break
            return True
        process = _SMI_PROCESS.match(line)
        if process is not None and "nvidia-smi" in self.tools:
            shown = f"{process['gpu']} {process['pid']} {process['used']} {process['name']}"
            self.add(f"process {index + 1}", shown, "nvidia-smi", index)
            return True
        return False

    def _pip_check(self, line: str, index: int) -> bool:
        """One line of ``pip check``: a broken requirement (kept whole), or none broken."""
        other, missing = _PIP_CHECK_OTHER.match(line), _PIP_CHECK_MISSING.match(line)
        if other is not None:
            self.add(f"dist {other['dist']}", other["version"], "pip check", index)
            self.add(f"dist {other['name']}", other["installed"], "pip check", index)
        elif missing is not None:
            self.add(f"dist {missing['dist']}", missing["version"], "pip check", index)
        elif _PIP_CHECK_CLEAN.match(line):
            self.add("pip check", "no broken requirements", "pip check", index)
            return True
        else:
            return False
        self.add(f"broken {index + 1}", line.strip(), "pip check", index)
        return True

    def _ds_report(self, line: str, index: int) -> bool:
        """A field of ``ds_report``'s environment info, or a row of its op table."""
        op = _DS_OP.match(line)
        if op is not None:
            shown = f"[{op['installed']}] [{op['compatible']}]"  # installed, compatible
            self.add(f"ds op {op['op']}", shown, "ds_report", index)
            return True
        field = _DS_FIELD.match(line)
        name = _DS_KEYS.get(field["key"]) if field is not None else None
        if field is None or name is None:
            return False
        value = field["value"].split(",", 1)[0] if name == "deepspeed" else field["value"]
        self.add(name, value, "ds_report", index)
        return True

    def _bitsandbytes(self, line: str, index: int) -> None:
        """What ``python -m bitsandbytes`` says of its version, CUDA and native library."""
        tool = "python -m bitsandbytes"
        binary, cuda = _BNB_BINARY.search(line), _BNB_CUDA.search(line)
        capability, version = _BNB_CAPABILITY.search(line), _BNB_VERSION.search(line)
        failed = _BNB_FAILED.search(line)
        if binary is not None:
            self.add("bnb library", binary["path"], tool, index)
        if cuda is not None:
            digits = cuda["cuda"] or cuda["setting"]
            self.add("bnb cuda", f"{digits} (CUDA {digits[:-1]}.{digits[-1]})", tool, index)
        if capability is not None:
            shown = capability["cc"] or f"{capability['major']}.{capability['minor']}"
            self.add("bnb capability", shown, tool, index)
        if version is not None:
            self.add("bitsandbytes", version["version"], tool, index)
        if failed is not None:
            said = failed["error"] or failed["detail"] or f"CUDA SETUP: {failed['setup']}"
            self.add("bnb load error", said, tool, index)
        override, missing = _BNB_OVERRIDE.search(line), _BNB_MISSING.search(line)
        if override is not None:
            self.add("bnb cuda override", f"BNB_CUDA_VERSION={override['cuda']}", tool, index)
        if missing is not None:
            self.add("bnb missing binary", missing["path"], tool, index)
        if _BNB_CPU.search(line) and "warn(" not in line:
            self.add("bnb cpu library", "compiled without GPU support", tool, index)
        if line.strip() == "SUCCESS!":
            self.add("bnb loaded", "its check printed SUCCESS!", tool, index)

    def _warning(self, line: str, index: int) -> bool:
        """The warning torch gives for a GPU its build has no code for: the GPU, the archs."""
        warning = _CAPABILITY_WARNING.search(line)
        if warning is not None:
            self.add(
                "gpu warning",
                f"{warning['gpu'].strip()} sm_{warning['sm']}",
                "torch's warning",
                index,
            )
            return True
        archs = _ARCHS.search(line)
        if archs is not None:
            self.add("torch archs", " ".join(archs["archs"].split()), "torch's warning", index)
            return True
        return False


# -- the facts as an environment -----------------------------------------------------------


def read_pasted(text: str) -> PastedEnvironment | None:
    r"""The environment ``text`` describes, or ``None`` when no report tool's output is in it.

    >>> pasted = read_pasted("PyTorch version: 2.6.0+cu126\nNvidia driver version: 570.124.04")
    >>> pasted.environment.torch.cuda, pasted.environment.nvml.driver_version
    ('12.6', '570.124.04')
    """
    reader = _Reader(_lines(text))
    reader.read()
    if not reader.facts or not any(t in TOOLS for t in reader.tools):
        return None
    last: dict[str, PastedFact] = {}
    notes: list[str] = []
    for fact in reader.facts:
        before = last.get(fact.name)
        if (
            before is not None
            and _known(before.value)
            and _known(fact.value)
            and before.value != fact.value
            and not fact.name.startswith("dist ")
        ):
            notes.append(
                f"the paste gives {fact.name} twice ({before.value!r}, line {before.line}; "
                f"{fact.value!r}, line {fact.line}): the later is used"
            )
        if before is None or _known(fact.value) or not _known(before.value):
            last[fact.name] = fact
    tools = tuple(t for t in TOOLS if t in reader.tools)
    environment = _environment(last, tools)
    return PastedEnvironment(
        environment=environment, tools=tools, facts=tuple(reader.facts), notes=tuple(notes)
    )


def _value(facts: dict[str, PastedFact], name: str) -> str | None:
    fact = facts.get(name)
    return fact.value if fact is not None and _known(fact.value) else None


def _environment(facts: dict[str, PastedFact], tools: tuple[str, ...]) -> Environment:
    from errkb.probes.environment import Environment

    source = f"the paste ({', '.join(tools)})"
    nvml, reason = _nvml(facts, source)
    return Environment(
        system=_system(facts),
        nvml=nvml,
        nvml_error=reason,
        torch=_torch(facts, source),
        stack=_stack(facts, source),
        extensions=_bitsandbytes_library(facts, source),
    )


def _system(facts: dict[str, PastedFact]) -> SystemReading:
    from errkb.probes.system import SystemReading

    platform = _value(facts, "platform") or ""
    shown_os = _value(facts, "os") or platform
    machine = _MACHINE.search(" ".join(filter(None, (platform, _value(facts, "os")))))
    glibc = _GLIBC.search(" ".join(filter(None, (_value(facts, "glibc"), platform))))
    python = (_value(facts, "python") or "").split(" ", 1)[0]
    ram = _RAM.match(_value(facts, "memory") or "")
    return SystemReading(
        os=shown_os,
        machine=machine["machine"] if machine else "",
        glibc=glibc["glibc"] if glibc else None,
        python=python,
        abi=None,
        executable="",
        # accelerate prints GB of 2**30 bytes (its env command divides by 1024**3)
        memory_bytes=int(float(ram["amount"]) * (1 << 30)) if ram else None,
        shm_bytes=None,
        container=None,
        variables=(),
        hf_cache="",
        hf_cache_free_bytes=None,
    )


def _gpu_indices(facts: dict[str, PastedFact]) -> list[int]:
    return sorted(
        int(name.split()[1])
        for name in facts
        if name.startswith("gpu ") and name.split()[1].isdigit() and len(name.split()) == 2
    )


def _nvml(facts: dict[str, PastedFact], source: str) -> tuple[NvmlReading | None, str | None]:
    from errkb.probes import GpuDevice
    from errkb.probes.gpu import GpuProcess, NvmlReading

    warned = _value(facts, "gpu warning")
    devices = []
    for index in _gpu_indices(facts):
        name = facts[f"gpu {index}"].value
        capability = None
        if warned is not None:
            gpu, _, sm = warned.rpartition(" sm_")
            if gpu.strip() == name.strip() or gpu.strip().endswith(name.strip()):
                capability = (int(sm[:-1]), int(sm[-1]))
        total = _value(facts, f"gpu {index} memory")
        used = _value(facts, f"gpu {index} used")
        devices.append(
            GpuDevice(
                index=index,
                name=name,
                total_bytes=int(total) * _MIB if total else 0,
                free_bytes=(int(total) - int(used)) * _MIB if total and used else None,
                capability=capability,
                source="paste",
            )
        )
    if not devices and warned is not None:  # torch's warning alone names the GPU
        gpu, _, sm = warned.rpartition(" sm_")
        devices.append(
            GpuDevice(
                index=0,
                name=gpu.strip(),
                total_bytes=0,
                capability=(int(sm[:-1]), int(sm[-1])),
                source="paste",
            )
        )
    driver = _value(facts, "driver")
    cuda = _value(facts, "driver cuda")
    if not devices and driver is None:
        return None, "the paste names no GPU and no driver"
    cuda_version = None
    if cuda is not None:
        major, _, minor = cuda.partition(".")
        cuda_version = int(major) * 1000 + int(minor or 0) * 10
    processes = []
    for fact in (f for f in facts.values() if f.name.startswith("process ")):
        gpu, pid, used, name = fact.value.split(" ", 3)
        processes.append(GpuProcess(device=int(gpu), pid=int(pid), used_bytes=int(used) * _MIB,
                                    name=name))  # fmt: skip
    reading = NvmlReading(
        library=source,
        driver_version=driver,
        cuda_driver_version=cuda_version,
        devices=tuple(devices),
        processes=tuple(processes),
    )
    return reading, None


def _torch(facts: dict[str, PastedFact], source: str) -> TorchBuild:
    """The build of torch the paste states; what it leaves out is said in ``error``."""
    from errkb.probes.torch_build import TorchBuild

    stated = _value(facts, "torch") or _value(facts, "dist torch")
    if stated is None:
        return TorchBuild(
            installed=True, error="torch's version is not in the paste", source=source
        )
    match = _TORCH_ONLY.match(stated)
    version = match["version"] if match else stated.split()[0]
    accelerator = (match["gpu"] if match else None) or _value(facts, "torch accelerator") or ""
    label = _CU_LABEL.search(version)
    built = _value(facts, "torch cuda")
    rocm = _value(facts, "torch rocm")
    archs = tuple((_value(facts, "torch archs") or "").split())
    cuda: str | None = None
    if label is not None:
        digits = label["digits"]
        cuda = f"{digits[:-1]}.{digits[-1]}"
    elif built is not None and _CUDA_VERSION.fullmatch(built):
        cuda = ".".join(built.split(".")[:2])
    cpu = version.endswith("+cpu") or (
        built is not None and built.lower() == "none" and rocm is None
    )
    if cuda is None and rocm is None and not cpu:
        said = f" ({accelerator})" if accelerator else ""
        return TorchBuild(
            installed=True,
            version=version,
            archs=archs,
            error=f"the paste does not say which CUDA torch {version} was built for{said}",
            source=source,
        )
    return TorchBuild(
        installed=True,
        version=version,
        cuda=cuda,
        hip=rocm,
        archs=archs,
        source=source,
    )


def _stack(facts: dict[str, PastedFact], source: str) -> StackReading:
    from errkb.probes.stack import Distribution, StackReading

    found: dict[str, Distribution] = {}
    for fact in facts.values():
        if fact.name.startswith("dist "):
            name = fact.name[5:]
        elif fact.name in _DISTS:
            name = _DISTS[fact.name]
        elif fact.name == "torch":
            name = "torch"
        else:
            continue
        version = fact.value.split()[0] if fact.value.split() else ""
        if not _known(version) or not version[:1].isdigit():
            continue
        found.setdefault(name.lower().replace("_", "-"), Distribution(
            name=name, version=version, folder=f"{fact.tool}, line {fact.line}"))  # fmt: skip
    broken = _broken(facts)
    checked = bool(broken) or "pip check" in facts
    return StackReading(
        distributions=tuple(found.values()),
        checked=len(found) if checked else 0,
        broken=broken,
        note=None
        if checked
        else "not checked: a paste lists versions, not what each distribution requires",
        source=source,
    )


def _broken(facts: dict[str, PastedFact]) -> tuple[Broken, ...]:
    """The requirements ``pip check`` said the installed set breaks, as the stack probe's."""
    from errkb.probes.stack import Broken

    found = []
    for fact in facts.values():
        if not fact.name.startswith("broken "):
            continue
        other, missing = _PIP_CHECK_OTHER.match(fact.value), _PIP_CHECK_MISSING.match(fact.value)
        if other is not None:
            found.append(
                Broken(distribution=other["dist"], version=other["version"],
                       requirement=other["req"], required=other["name"],
                       installed=other["installed"])
            )  # fmt: skip
        elif missing is not None:
            named = _REQUIRED_NAME.match(missing["req"])
            found.append(
                Broken(distribution=missing["dist"], version=missing["version"],
                       requirement=missing["req"],
                       required=named[0] if named else missing["req"], installed=None)
            )  # fmt: skip
    return tuple(found)


def _bitsandbytes_library(facts: dict[str, PastedFact], source: str) -> tuple[Extension, ...]:
    """The native library of bitsandbytes, as the extension probe reports one: loaded or not.

    Only what ``python -m bitsandbytes`` said: an error loading it, its check's success, or
    that the library it loaded was compiled without GPU support (its CPU library, loaded);
    ``()`` when it said none of these (a cut paste).
    """
    from errkb.probes.extensions import Extension

    error, loaded = _value(facts, "bnb load error"), _value(facts, "bnb loaded")
    path = _value(facts, "bnb library") or ""
    if error is None and loaded is None and _value(facts, "bnb cpu library") is not None:
        loaded = "its CPU library loaded, compiled without GPU support"
        path = path or "libbitsandbytes_cpu"
    if error is None and loaded is None:
        return ()
    named = _BNB_BINARY.search(f"bin {error}") if error else None
    path = named["path"] if named is not None and not path else path
    return (
        Extension(
            distribution="bitsandbytes",
            version=_value(facts, "bitsandbytes") or "",
            kind="library",
            name=path.replace("\\", "/").rsplit("/", 1)[-1] or "the native library",
            path=path,
            error=error if loaded is None else None,
            source=source,
        ),
    )


def probe(evidence: Evidence, timeout: float) -> PastedEnvironment | None:  # noqa: ARG001
    """The ``pasted-environment`` probe: the environment a pasted text describes, if any.

    ``None`` for a live exception (its machine is this one, read by the ``environment``
    probe) and for a text too long to be read whole. Reading the text touches nothing of
    this machine, so it runs with probes off too.
    """
    if evidence.text is None:
        return None
    return read_pasted(evidence.text)
