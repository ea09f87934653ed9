"""Which engine printed the message: vLLM release ranges, from the wording and the install.

vLLM's KV-cache arithmetic and its default ``gpu_memory_utilization`` changed over the
releases; the message's wording narrows the range of releases that can have printed it, and an
installed vLLM (``importlib.metadata``) narrows it to one release when it lies in that range.
Every boundary here was read in vLLM's sources at the release named (file:line@version).
"""

from __future__ import annotations

import re

from errkb._attrs import attrs

__all__ = [
    "V_CPU_WORDING",
    "V_DEFAULT_092",
    "V_GROUPED_NEEDED",
    "V_MLA_CACHE",
    "V_PP_BALANCED",
    "V_SLIDING_SPEC",
    "Era",
    "era_of",
    "parse_version",
    "show",
]

Version = tuple[int, ...]

#: The default ``gpu_memory_utilization`` became 0.92 in 0.20.0 for ``CacheConfig``
#: (vllm/config/cache.py:66@v0.20.0) and for ``LLM()`` (vllm/entrypoints/llm.py:231@v0.20.0);
#: ``EngineArgs`` takes CacheConfig's (vllm/engine/arg_utils.py:502@v0.20.0) and ``vllm serve``
#: takes EngineArgs' (arg_utils.py:1063@v0.20.0), so all three share it. 0.9 before: EngineArgs
#: (arg_utils.py:28@v0.2.7) and LLM() (llm.py:80@v0.2.7) to 0.19.1 (config/cache.py:41@v0.19.1,
#: llm.py:236@v0.19.1).
V_DEFAULT_092: Version = (0, 20, 0)
#: V1 sizes sliding-window layers by their window from 0.8.3 (``SlidingWindowSpec``,
#: vllm/v1/kv_cache_interface.py:104-111@v0.8.3); before, every layer is full.
V_SLIDING_SPEC: Version = (0, 8, 3)
#: From 0.14.0 the check sums pages over KV-cache groups, padded to equal group sizes
#: (``_max_memory_usage_bytes_from_groups``, vllm/v1/core/kv_cache_utils.py:1318@v0.14.0).
V_GROUPED_NEEDED: Version = (0, 14, 0)
#: V0 caches DeepSeek's MLA latent from 0.7.1 (vllm/config.py:747-753@v0.7.1); 0.7.0 caches
#: heads of qk_nope + qk_rope (config.py:737-743@v0.7.0); before, heads padded to 256
#: (config.py:719-726@v0.6.6).
V_MLA_CACHE: Version = (0, 7, 1)
V_MLA_UNPADDED: Version = (0, 7, 0)
#: From 0.8.0 the layers left over by pipeline parallelism go one each to the stages before
#: the last (vllm/distributed/utils.py:118-124@v0.9.0); before, all to the last stage.
V_PP_BALANCED: Version = (0, 8, 0)
#: "(which also controls CPU memory on the CPU backend)": 0.22.0 on
#: (vllm/v1/core/kv_cache_utils.py:765-766@v0.24.0; not in 0.20.2; the registry has no 0.21.0).
V_CPU_WORDING: Version = (0, 22, 0)


def parse_version(text: str) -> Version | None:
    """``"0.9.0.post1"`` -> ``(0, 9, 0)``; None when it does not start with a release number."""
    m = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", text.strip())
    if m is None:
        return None
    return tuple(int(g or 0) for g in m.groups())


def show(version: Version) -> str:
    """``(0, 9, 0)`` -> ``"0.9.0"``."""
    return ".".join(map(str, version))


@attrs.frozen(kw_only=True)
class Era:
    """The engine that printed the message and the releases that can have printed it.

    Attributes:
        engine: ``vllm-v0`` (the old engine and V0 workers), ``vllm-v1``, ``chattts`` (its
            engine vendors vLLM 0.2.7), or ``unknown``.
        low: the earliest release that prints this wording, or None if not known.
        high: the latest one (inclusive), or None when the wording is still printed.
        why: what told the range, for the facts.
    """

    engine: str
    low: Version | None = None
    high: Version | None = None
    why: str = ""

    @property
    def exact(self) -> bool:
        """Whether the range is one release."""
        return self.low is not None and self.low == self.high

    def before(self, version: Version) -> bool | None:
        """True if every release in range is older than ``version``, False if none is."""
        if self.high is not None and self.high < version:
            return True
        if self.low is not None and self.low >= version:
            return False
        return None

    def default_utilizations(self) -> tuple[float, ...]:
        """The default ``gpu_memory_utilization`` of the releases in range (see V_DEFAULT_092)."""
        older = self.before(V_DEFAULT_092)
        if older is True:
            return (0.9,)
        if older is False:
            return (0.92,)
        return (0.9, 0.92)

    def describe(self) -> str:
        """``"vLLM 0.8.4 to 0.9.0"``, ``"vLLM 0.22.0 or later"``, ``"vLLM 0.9.2"``."""
        name = "ChatTTS's engine (vLLM 0.2.7)" if self.engine == "chattts" else "vLLM"
        if self.engine == "chattts":
            return name
        if self.exact and self.low is not None:
            return f"{name} {show(self.low)}"
        if self.low is not None and self.high is not None:
            return f"{name} {show(self.low)} to {show(self.high)}"
        if self.low is not None:
            return f"{name} {show(self.low)} or later"
        if self.high is not None:
            return f"{name} {show(self.high)} or earlier"
        return name


#: (pattern, low, high, what it says) for the KV-cache messages of vLLM V1; every form found
#: in vllm/v1/core/kv_cache_utils.py at the releases named.
_V1_MARKS: tuple[tuple[str, Version | None, Version | None, str], ...] = (
    # "... (4.00 GB KV cache is needed": GiB figures labelled GB (0.7.0 to 0.8.2, line 480@v0.8.0).
    (r"\d GB KV cache is needed", (0, 7, 0), (0, 8, 2), "sizes labelled GB"),
    (r"\d GiB KV cache is needed", (0, 8, 3), None, "sizes in GiB"),
    # A bug left the estimate out of the message: 0.8.4 to 0.9.0 (lines 541-543@v0.8.4).
    (
        r"Based on the available memory,(?! the estimated)",
        (0, 8, 4),
        (0, 9, 0),
        "'Based on the available memory,' without the estimate",
    ),
    (r"estimated maximum model length is \d", (0, 9, 1), None, "vLLM's estimate"),
    (r"the models's max seq len", (0, 7, 0), (0, 20, 2), "'models's'"),
    (r"the model's max seq len \(\d+\), \(", V_CPU_WORDING, None, "'model's'"),
    (r"CPU memory on the CPU backend", V_CPU_WORDING, None, "the CPU backend's mention"),
    (r"conserving_memory", (0, 13, 0), None, "the link to the docs"),
)
#: "No available memory for the cache blocks", vLLM V0 and V1 alike.
_NO_BLOCKS_MARKS: tuple[tuple[str, Version | None, Version | None, str], ...] = (
    (r"on the CPU\s+backend, despite its name", V_CPU_WORDING, None, "the CPU backend's mention"),
    (r"conserving_memory", (0, 13, 0), None, "the link to the docs"),
)
#: The message ends where vLLM 0.12 and earlier end it: no link to the docs follows (the link
#: is there from 0.13.0: kv_cache_utils.py:690-691@v0.13.0).
_ENDS_OLD = re.compile(r"when initializing the engine\.\s*$")
_LAST_WITHOUT_LINK: Version = (0, 12, 0)


def _narrow(
    low: Version | None,
    high: Version | None,
    marks: tuple[tuple[str, Version | None, Version | None, str], ...],
    text: str,
) -> tuple[Version | None, Version | None, list[str]]:
    import regex

    why: list[str] = []
    for pattern, lo, hi, what in marks:
        if regex.search(pattern, text):
            if lo is not None and (low is None or lo > low):
                low = lo
            if hi is not None and (high is None or hi < high):
                high = hi
            why.append(what)
    return low, high, why


def era_of(
    variant: str, message: str | None, kind: str | None, installed: str | None
) -> tuple[Era, str | None]:
    """The era of ``message`` (of the advisor's ``variant``) and a note about the install.

    ``kind`` is the engine the frames show (:attr:`EngineReading.kind`); ``installed`` the
    version of an installed vLLM, used when it lies in the wording's range.
    """
    text = message or ""
    if kind == "chattts":
        return Era(engine="chattts", low=(0, 2, 7), high=(0, 2, 7), why="ChatTTS's engine"), None
    low: Version | None = None
    high: Version | None = None
    why: list[str] = []
    engine = "unknown"
    if variant in ("old", "cpu"):
        # "The model's max seq len (N) is larger than ... KV cache (M)": the old engine and the
        # V0 workers, as the released archives print it (errkb mine: llm_engine.py:284@v0.2.7
        # to worker/worker.py:665@v0.10.2; the CPU worker's VLLM_CPU_KVCACHE_SPACE wording
        # cpu_worker.py@v0.4.1 to v0.9.2).
        low, high = ((0, 4, 1), (0, 9, 2)) if variant == "cpu" else ((0, 2, 7), (0, 10, 2))
        engine, why = "vllm-v0", ["the V0 wording"]
    elif variant == "v1":
        engine = "vllm-v1"
        low, high, why = _narrow((0, 7, 0), None, _V1_MARKS, text)
        # No link at the end says 0.12 or earlier only when the wording allows it: a wording of
        # 0.22 on (the CPU backend's mention) that ends there is a paste cut before the link.
        if (
            _ENDS_OLD.search(text)
            and (high is None or high > _LAST_WITHOUT_LINK)
            and (low is None or low <= _LAST_WITHOUT_LINK)
        ):
            high = _LAST_WITHOUT_LINK
            why.append("no link to the docs at the end")
    elif variant == "no-blocks":
        low, high, why = _narrow(None, None, _NO_BLOCKS_MARKS, text)
        engine = "vllm-v1" if low is not None else "unknown"
        if _ENDS_OLD.search(text) and low is None:
            high = _LAST_WITHOUT_LINK
            why.append("no link to the docs at the end")
    elif variant == "free-memory":
        engine = "vllm-v1"
    if kind in ("vllm-v0", "vllm-v1"):
        engine = kind
    note = None
    version = parse_version(installed) if installed else None
    if version is not None:
        fits = (low is None or version >= low) and (high is None or version <= high)
        if fits:
            low = high = version
            why.append(f"vLLM {installed} is installed here")
        else:
            note = (
                f"vLLM {installed} is installed here, but its releases do not print this "
                f"wording ({Era(engine=engine, low=low, high=high).describe()} do): the "
                "message comes from another environment"
            )
    return Era(engine=engine, low=low, high=high, why="; ".join(why)), note
