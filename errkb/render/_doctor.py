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

__all__ = ["checkup_layout", "facts", "render_checkup_markdown", "user_hider"]


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
        for group, items in facts(checkup.environment)
        if items
    )
    blocks.append(Block(title="the environment", severity="facts", subtitle="", sections=sections))
    read = ", ".join(f"{name} {seconds:.1f}s" for name, seconds in checkup.environment.timings)
    broken = sum(v.severity == "broken" for v in checkup.verdicts)
    verdict = f"{broken} broken" if broken else "nothing broken"
    notes = [f"{verdict}; read in {checkup.seconds:.1f}s ({read})"]
    return blocks, notes


def render_checkup_markdown(checkup: Checkup, *, hide_user: bool = False) -> str:
    """The checkup as Markdown for an issue: verdicts, then the facts folded in a table."""
    shown = user_hider(hide_user)
    broken = sum(v.severity == "broken" for v in checkup.verdicts)
    warnings = sum(v.severity == "warning" for v in checkup.verdicts)
    out = [f"### errkb doctor: {broken} broken, {warnings} warnings", ""]
    for verdict in checkup.verdicts:
        out += [f"**{verdict.severity}**: {escape_markdown(shown(verdict.title))}", ""]
        out += [escape_markdown(shown(verdict.why)), ""]
        if verdict.fix:
            out += [f"Fix: {escape_markdown(shown(verdict.fix))}", ""]
        out += [code_block(shown(c)) for c in verdict.commands]
        if verdict.commands:
            out.append("")
    out += ["<details><summary>Environment</summary>", "", "| | |", "| --- | --- |"]
    for group, items in facts(checkup.environment):
        for name, value, _source in items:
            cell = escape_markdown(shown(value))
            out.append(f"| {escape_markdown(group)}: {escape_markdown(shown(name))} | {cell} |")
    out += ["", "</details>"]
    return "\n".join(out) + "\n"
