"""The system probe: the OS, glibc, this Python, /dev/shm, the container, variables, cache space.

Everything here is read from the standard library and the file system in a few milliseconds:
nothing is imported from the ML stack and no child process is started. What cannot be read (no
``/dev/shm`` on Windows or macOS, no glibc on musl) is ``None``, never a guess.
"""

from __future__ import annotations

import os
import platform
import sys
import sysconfig
from pathlib import Path

from errkb._attrs import attrs

__all__ = ["VARIABLES", "SystemReading", "hf_cache_folder", "read_system"]

#: The environment variables shown: every CUDA_* and NCCL_* one, and these.
VARIABLES = (
    "LD_LIBRARY_PATH",
    "TORCH_CUDA_ARCH_LIST",
    "PYTORCH_CUDA_ALLOC_CONF",
    "BNB_CUDA_VERSION",
    "HF_HOME",
    "HF_HUB_CACHE",
    "MASTER_ADDR",
    "MASTER_PORT",
)
_PREFIXES = ("CUDA_", "NCCL_")


@attrs.frozen(kw_only=True)
class SystemReading:
    """The machine and the interpreter, as this process sees them.

    Attributes:
        os: the platform string (``Linux-6.1.0-x86_64-with-glibc2.36``).
        machine: ``x86_64``, ``aarch64``, ``AMD64``...
        glibc: the C library's version (``2.36``), ``None`` where it is not glibc.
        python: the version, e.g. ``3.11.9``.
        abi: the interpreter's extension tag (``cpython-311-x86_64-linux-gnu``), what a
            compiled extension's file name must carry.
        executable: the interpreter's path.
        memory_bytes: the machine's (or container's view of the) physical memory.
        shm_bytes: the size of ``/dev/shm`` (``None``: not there).
        container: ``docker``, ``podman``, ``kubernetes`` or ``container`` where a marker
            says so, else ``None``.
        variables: CUDA, NCCL and the other :data:`VARIABLES`, name and value, sorted.
        hf_cache: where the Hugging Face cache lives (see :func:`hf_cache_folder`).
        hf_cache_free_bytes: free space on its file system (``None``: cannot tell).
    """

    os: str
    machine: str
    glibc: str | None
    python: str
    abi: str | None
    executable: str
    memory_bytes: int | None
    shm_bytes: int | None
    container: str | None
    variables: tuple[tuple[str, str], ...]
    hf_cache: str
    hf_cache_free_bytes: int | None


def read_system(environ: dict[str, str] | None = None) -> SystemReading:
    """Read the system now (``environ``: the variables to read, ``os.environ`` by default)."""
    env = dict(os.environ if environ is None else environ)
    cache = hf_cache_folder(env)
    return SystemReading(
        os=platform.platform(),
        machine=platform.machine(),
        glibc=_glibc(),
        python=platform.python_version(),
        abi=sysconfig.get_config_var("SOABI"),
        executable=sys.executable,
        memory_bytes=_memory(),
        shm_bytes=_size_of("/dev/shm"),  # noqa: S108 - its size is read, nothing written
        container=_container(env),
        variables=tuple(
            sorted(
                (name, value)
                for name, value in env.items()
                if name.startswith(_PREFIXES) or name in VARIABLES
            )
        ),
        hf_cache=str(cache),
        hf_cache_free_bytes=_free_space(cache),
    )


def hf_cache_folder(environ: dict[str, str]) -> Path:
    """The Hub's cache folder as huggingface_hub finds it: HF_HUB_CACHE, HF_HOME/hub, XDG."""
    if environ.get("HF_HUB_CACHE"):
        return Path(environ["HF_HUB_CACHE"]).expanduser()
    if environ.get("HF_HOME"):
        return Path(environ["HF_HOME"]).expanduser() / "hub"
    base = environ.get("XDG_CACHE_HOME") or str(Path("~/.cache").expanduser())
    return Path(base) / "huggingface" / "hub"


def _glibc() -> str | None:
    try:
        found = os.confstr("CS_GNU_LIBC_VERSION")  # "glibc 2.36"
    except (AttributeError, ValueError, OSError):
        return None
    if not found or not found.startswith("glibc "):
        return None
    return found.partition(" ")[2]


def _memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def _size_of(path: str) -> int | None:
    try:
        stat = os.statvfs(path)
    except (AttributeError, OSError):
        return None
    return stat.f_blocks * stat.f_frsize


def _free_space(folder: Path) -> int | None:
    """Free bytes on the file system of ``folder``, or of its nearest existing parent."""
    for candidate in (folder, *folder.parents):
        try:
            stat = os.statvfs(candidate)
        except (AttributeError, OSError):
            continue
        return stat.f_bavail * stat.f_frsize
    return None


def _container(environ: dict[str, str]) -> str | None:
    """Which container this runs in, where a marker says so (``None``: none seen)."""
    if environ.get("KUBERNETES_SERVICE_HOST"):
        return "kubernetes"
    if Path("/.dockerenv").exists():
        return "docker"
    if Path("/run/.containerenv").exists():
        return "podman"
    if environ.get("container"):  # systemd's convention, set by podman, lxc, nspawn
        return "container"
    try:
        cgroups = Path("/proc/1/cgroup").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for marker in ("docker", "kubepods", "containerd", "lxc"):
        if marker in cgroups:
            return "kubernetes" if marker == "kubepods" else marker
    return None
