"""The layout of a checkup (``errkb doctor``): verdicts first, then the facts with their sources.

The same blocks as a diagnosis (:class:`errkb.render._document.Block`), so the terminal
renderers draw both alike: one block per verdict (what is wrong, why, the fix, the command
shown but never run, the table rows it rests on), then one block of facts. The Markdown form
is shorter, for an issue: the verdicts, then the facts in a table folded under ``<details>``.

Every string passes through :func:`errkb._sanitize.clean` (secrets masked, control characters
shown escaped); with ``hide_user`` the home folder becomes ``~`` and the user's name ``<user>``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from errkb._sanitize import clean
from errkb.render._document import Block, Section
from errkb.render._markdown import code_block, escape_markdown
from errkb.units import format_bytes

if TYPE_CHECKING:
    from collections.abc import Callable

    from errkb.doctor import Checkup, Environment, Verdict
    from errkb.probes.pasted_env import PastedEnvironment

__all__ = ["checkup_layout", "facts", "pasted_facts", "render_checkup_markdown", "user_hider"]

#: How the facts of a paste are named when shown (the rest: their name as read).
_PASTED_NAMES = {
    "torch": "torch",
    "torch cuda": "CUDA torch was built with",
    "torch rocm": "ROCm torch was built with",
    "torch archs": "torch's architectures",
    "torch accelerator": "torch's accelerator",
    "cuda available": "CUDA available",
    "cuda toolkit": "CUDA toolkit (nvcc)",
    "driver": "NVIDIA driver",
    "driver cuda": "driver's CUDA",
    "gpu warning": "GPU torch warns about",
    "os": "OS",
    "platform": "platform",
    "python": "Python",
    "glibc": "libc",
    "memory": "system memory",
    "nvcc": "nvcc",
    "deepspeed built with": "DeepSpeed's wheel built with",
    "bnb library": "bitsandbytes' native library",
    "bnb cuda": "CUDA bitsandbytes set up for",
    "bnb cuda override": "bitsandbytes' CUDA override",
    "bnb capability": "highest compute capability bitsandbytes saw",
    "bnb load error": "bitsandbytes' native library did not load",
    "bnb missing binary": "bitsandbytes' CUDA library not found",
    "bnb cpu library": "bitsandbytes' CPU library",
    "bnb loaded": "bitsandbytes' native library loaded",
    "pip check": "pip check",
}


def user_hider(hide_user: bool) -> Callable[[str], str]:
    """A function that cleans a string and, with ``hide_user``, hides whose machine it is."""
    import getpass

    home = str(Path("~").expanduser())
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = ""

    def shown(text: str) -> str:
        out = clean(text)
        if hide_user:
            if home not in ("", "/", "~"):
                out = out.replace(home, "~")
            if len(user) > 2:
                out = out.replace(user, "<user>")
        return out

    return shown


def _size(value: int | None) -> str:
    return "unknown" if value is None else format_bytes(value)


def facts(env: Environment) -> list[tuple[str, list[tuple[str, str, str]]]]:
    """The facts by group: (group, [(name, value, source), ...]), in the order shown."""
    system = env.system
    groups: list[tuple[str, list[tuple[str, str, str]]]] = []
    groups.append(
        (
            "System",
            [
                ("OS", system.os, "platform"),
                ("glibc", system.glibc or "not glibc", "os.confstr"),
                ("Python", f"{system.python} ({system.abi})", system.executable),
                ("memory", _size(system.memory_bytes), "sysconf"),
                ("/dev/shm", _size(system.shm_bytes), "statvfs"),  # noqa: S108 - a fact, not a temp file
                ("container", system.container or "none seen", "/.dockerenv, cgroups"),
                (
                    "HF cache",
                    f"{system.hf_cache} ({_size(system.hf_cache_free_bytes)} free)",
                    "HF_HUB_CACHE, HF_HOME",
                ),
            ],
        )
    )
    gpu: list[tuple[str, str, str]] = []
    nvml = env.nvml
    if nvml is None:
        gpu.append(("NVML", f"not read ({env.nvml_error})", "ctypes"))
    else:
        cuda = nvml.cuda_driver_version
        shown_cuda = f"CUDA {cuda // 1000}.{cuda % 1000 // 10}" if cuda else "CUDA unknown"
        gpu.append(("driver", f"{nvml.driver_version or 'unknown'} ({shown_cuda})", nvml.library))
        for device in nvml.devices:
            cap = f"sm_{device.capability[0]}{device.capability[1]}" if device.capability else "?"
            free = f", {_size(device.free_bytes)} free" if device.free_bytes is not None else ""
            gpu.append(
                (
                    f"GPU {device.index}",
                    f"{device.name}, {cap}, {_size(device.total_bytes)}{free}",
                    nvml.library,
                )
            )
        gpu.extend(
            (
                f"GPU {process.device} process",
                f"pid {process.pid} {process.name or ''} holds {_size(process.used_bytes)}",
                nvml.library,
            )
            for process in nvml.processes
        )
    groups.append(("GPU", gpu))
    torch = env.torch
    if torch.error or not torch.installed:
        value = torch.error or "not installed"
    else:
        runtime = (
            f"CUDA {torch.cuda}" if torch.cuda else f"ROCm {torch.hip}" if torch.hip else "CPU only"
        )
        archs = " ".join(torch.archs) or "no GPU code"
        value = f"{torch.version}, {runtime}, {archs}, cxx11 ABI {torch.cxx11_abi}"
    groups.append(("torch", [("build", value, torch.source)]))
    stack = env.stack
    installed = [(d.name, d.version, Path(d.folder).name) for d in stack.distributions]
    summary = stack.note or (
        f"{len(stack.broken)} broken of the requirements of {stack.checked} distributions"
    )
    installed.append(("requirements", summary, stack.source))
    groups.append(("Installed", installed))
    if env.extensions:
        groups.append(
            (
                "Extensions",
                [
                    (e.name, "loads" if e.error is None else f"fails: {e.error}", e.source)
                    for e in env.extensions
                ],
            )
        )
    if system.variables:
        groups.append(("Variables", [(n, v, "environment") for n, v in system.variables]))
    return groups


def pasted_facts(pasted: PastedEnvironment) -> list[tuple[str, list[tuple[str, str, str]]]]:
    """The facts of a paste by tool: (tool, [(name, value, "line N"), ...]), in the order read.

    Every line a fact was read from is named, so a reader can check it against the paste.
    """
    groups: dict[str, list[tuple[str, str, str]]] = {}
    for fact in pasted.facts:
        name = fact.name
        if name.startswith("dist "):
            name = name[5:]
        elif name.startswith("broken "):
            name = "broken requirement"
        elif name.startswith("ds op "):
            name = f"op {name[6:]} (installed, compatible)"
        elif name.startswith("gpu ") and name.endswith((" memory", " used")):
            gpu, _, what = name[4:].partition(" ")
            name = f"GPU {gpu} memory {'total' if what == 'memory' else 'used'}"
            value = f"{fact.value} MiB"
            groups.setdefault(fact.tool, []).append((name, value, f"line {fact.line}"))
            continue
        elif name.startswith("gpu ") and name[4:].isdigit():
            name = f"GPU {name[4:]}"
        elif name.startswith("process "):
            gpu, pid, used, process = fact.value.split(" ", 3)
            value = f"GPU {gpu}: pid {pid} {process} holds {used} MiB"
            groups.setdefault(fact.tool, []).append(("process", value, f"line {fact.line}"))
            continue
        shown = _PASTED_NAMES.get(name, name)
        groups.setdefault(fact.tool, []).append((shown, fact.value, f"line {fact.line}"))
    return list(groups.items())


def _groups(checkup: Checkup) -> list[tuple[str, list[tuple[str, str, str]]]]:
    if checkup.pasted is not None:
        return pasted_facts(checkup.pasted)
    return facts(checkup.environment)


def _verdict_block(verdict: Verdict, shown: Callable[[str], str]) -> Block:
    sections = [Section("Why", "text", (shown(verdict.why),))]
    if verdict.fix:
        sections.append(Section("Fix", "text", (shown(verdict.fix),), inline=True))
    if verdict.commands:
        sections.append(
            Section("Command (shown, not run)", "code", tuple(shown(c) for c in verdict.commands))
        )
    if verdict.sources:
        sections.append(Section("Sources", "list", tuple(shown(s) for s in verdict.sources)))
    return Block(
        title=shown(verdict.title),
        severity=verdict.severity,
        subtitle="",
        sections=tuple(sections),
        footer=(verdict.code,),
    )


def checkup_layout(checkup: Checkup, *, hide_user: bool = False) -> tuple[list[Block], list[str]]:
    """The blocks of a checkup (one per verdict, then the facts) and its closing notes."""
    shown = user_hider(hide_user)
    blocks = [_verdict_block(v, shown) for v in checkup.verdicts]
    sections = tuple(
        Section(
            group,
            "hanging",
            tuple(shown(f"{name}: {value}  ({source})") for name, value, source in items),
        )
        for group, items in _groups(checkup)
        if items
    )
    title = "the environment" if checkup.pasted is None else "the environment in the paste"
    blocks.append(Block(title=title, severity="facts", subtitle="", sections=sections))
    read = ", ".join(f"{name} {seconds:.1f}s" for name, seconds in checkup.environment.timings)
    broken = sum(v.severity == "broken" for v in checkup.verdicts)
    verdict = f"{broken} broken" if broken else "nothing broken"
    if checkup.pasted is None:
        notes = [f"{verdict}; read in {checkup.seconds:.1f}s ({read})"]
    else:
        said = f"{verdict} on the machine {checkup.pasted.source} describes"
        notes = [f"{said}; nothing of this machine was read", *map(shown, checkup.pasted.notes)]
    return blocks, notes


def render_checkup_markdown(checkup: Checkup, *, hide_user: bool = False) -> str:
    """The checkup as Markdown for an issue: verdicts, then the facts folded in a table."""
    shown = user_hider(hide_user)
    broken = sum(v.severity == "broken" for v in checkup.verdicts)
    warnings = sum(v.severity == "warning" for v in checkup.verdicts)
    out = [f"### errkb doctor: {broken} broken, {warnings} warnings", ""]
    if checkup.pasted is not None:
        tools = ", ".join(f"`{t}`" for t in checkup.pasted.tools)
        out[0] = f"### errkb doctor, from the pasted {tools}: {broken} broken, {warnings} warnings"
        out += [
            "Judged for the machine the paste describes; the commands are for that machine.",
            "",
        ]
    for verdict in checkup.verdicts:
        out += [f"**{verdict.severity}**: {escape_markdown(shown(verdict.title))}", ""]
        out += [escape_markdown(shown(verdict.why)), ""]
        if verdict.fix:
            out += [f"Fix: {escape_markdown(shown(verdict.fix))}", ""]
        out += [code_block(shown(c)) for c in verdict.commands]
        if verdict.commands:
            out.append("")
    summary = "Environment" if checkup.pasted is None else "What was read from the paste"
    out += [f"<details><summary>{summary}</summary>", "", "| | |", "| --- | --- |"]
    for group, items in _groups(checkup):
        for name, value, where in items:
            cell = escape_markdown(shown(value))
            if checkup.pasted is not None:
                cell += f" ({escape_markdown(where)})"
            out.append(f"| {escape_markdown(group)}: {escape_markdown(shown(name))} | {cell} |")
    out += ["", "</details>"]
    return "\n".join(out) + "\n"
