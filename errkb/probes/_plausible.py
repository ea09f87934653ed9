"""The plausible range of every figure that describes a model or a machine; past it, a refusal.

A figure far outside what any model or GPU has is a typo, a unit mixed up or an attack, never a
machine to compute for: a GPU of one byte gives a needed utilization of 459276288.9, a block of
10^300 tokens 300-digit notes, and 10^8 layers a loop that freezes whoever runs it. Each range
is wide (an order of magnitude or more past the largest published figure, which ``why`` names)
so that no real config is refused, and narrow enough that the arithmetic on it stays small.

Every surface checks the same table: ``errkb serve`` (422 naming the field), the CLI's evidence
flags (exit 2) and :func:`errkb.probes.model.model_shape` for any config it reads. The table is
printed in docs/console.md; a test holds the two equal.
"""

from __future__ import annotations

import json
import math
from typing import Any

from errkb._attrs import attrs
from errkb.exceptions import UsageError

__all__ = [
    "MODEL_RANGES",
    "RANGES",
    "WHAT_IF_RANGES",
    "OutOfRange",
    "Range",
    "check",
    "gpu_memory",
]


class OutOfRange(UsageError):  # noqa: N818 - a UsageError, named for what is wrong
    """A figure of the wrong kind or outside its plausible range: the place, the range, the value.

    ``field`` is where the figure was given, as the caller names it (``--block-size``,
    ``what_if.block_size``, ``config.json: field 'num_hidden_layers'``); ``kind`` what it must
    be (``a positive integer``), ``span`` its plausible range (``from 1 to 1,024``).
    """

    def __init__(
        self, field: str, kind: str, span: str, value: object, *, of_kind: bool = True
    ) -> None:
        self.field, self.kind, self.span, self.value = field, kind, span, value
        if of_kind:  # the right kind of figure, out of range: the range is the expectation
            said = f"{field}: expected {kind} {span}, got {_shown(value)}"
        else:
            said = f"{field}: expected {kind}, got {_shown(value)} (plausible: {span})"
        super().__init__(said)


@attrs.frozen(kw_only=True)
class Range:
    """The plausible values of one figure.

    Attributes:
        name: the figure's name, as a config or ``what_if`` spells it.
        low: the smallest plausible value.
        high: the largest plausible value.
        integer: whether only integers are valid (else any finite number).
        low_open: whether ``low`` itself is refused (a utilization of 0).
        unit: ``bytes`` for a size (shown as such in messages), else empty.
        why: what the ends rest on: the largest published figure, or the engine's own limit.
        aliases: other names configs give the same figure (``n_layer`` for GPT-2's layers).
    """

    name: str
    low: float
    high: float
    integer: bool = True
    low_open: bool = False
    unit: str = ""
    why: str
    aliases: tuple[str, ...] = ()

    @property
    def kind(self) -> str:
        """What a value must be: ``a positive integer``, ``a size``, ``a number``."""
        if self.unit == "bytes":
            return "a size"
        if self.integer:
            return "a positive integer" if self.low == 1 else "an integer"
        return "a number"

    @property
    def span(self) -> str:
        """The range in words: ``from 1 to 1,024``, ``above 0 and at most 1``."""
        low, high = _figure(self.low, self.unit), _figure(self.high, self.unit)
        return f"above {low} and at most {high}" if self.low_open else f"from {low} to {high}"

    def check(self, value: object, field: str) -> Any:
        """``value``, when it is a number in range; :class:`OutOfRange` naming ``field`` else."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise OutOfRange(field, self.kind, self.span, value, of_kind=False)
        if isinstance(value, float) and (self.integer or not math.isfinite(value)):
            raise OutOfRange(field, self.kind, self.span, value, of_kind=False)
        if self.kind == "a positive integer" and value <= 0:
            raise OutOfRange(field, self.kind, self.span, value, of_kind=False)
        below = value <= self.low if self.low_open else value < self.low
        if below or value > self.high:
            raise OutOfRange(field, self.kind, self.span, value)
        return value


def _figure(value: float, unit: str) -> str:
    if unit == "bytes":
        from errkb.units import format_bytes

        return format_bytes(value)
    return f"{value:,}" if float(value).is_integer() else f"{value:g}"


def _shown(value: object) -> str:
    """A value as it was given, cut to 40 characters (a 4,000-digit number is not echoed)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**30:
        digits = len(str(abs(value))) if value.bit_length() < 13000 else None
        size = f"{digits:,} digits" if digits else f"about 10^{int(value.bit_length() * 0.30103)}"
        return f"a number of {size}"
    try:
        text = json.dumps(value, allow_nan=True)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


_LAYERS_WHY = "the deepest published configs have 126 layers (Llama 3.1 405B)"
#: A model config's figures.
MODEL_RANGES: tuple[Range, ...] = (
    Range(
        name="num_hidden_layers",
        low=1,
        high=1024,
        why=_LAYERS_WHY,
        aliases=("n_layer", "num_layers"),
    ),
    Range(
        name="num_attention_heads",
        low=1,
        high=1024,
        why="Llama 3.1 405B and DeepSeek-V3 have 128 heads",
        aliases=("n_head", "num_heads"),
    ),
    Range(
        name="num_key_value_heads",
        low=1,
        high=1024,
        why="at most num_attention_heads: each KV head serves one or more query heads",
        aliases=("num_kv_heads", "n_head_kv", "multi_query_group_num"),
    ),
    Range(
        name="head_dim", low=1, high=4096, why="published heads are 64 to 256 wide (Gemma 7B: 256)"
    ),
    Range(
        name="hidden_size",
        low=1,
        high=131072,
        why="Llama 3.1 405B's is 16,384",
        aliases=("n_embd", "d_model"),
    ),
    Range(name="vocab_size", low=1, high=16_777_216, why="Gemma 3's vocabulary is 262,208 tokens"),
    Range(
        name="max_position_embeddings",
        low=1,
        high=134_217_728,
        why="Llama 4 Scout's context is 10,485,760 tokens",
        aliases=("n_positions", "max_seq_len"),
    ),
    Range(name="sliding_window", low=1, high=134_217_728, why="as the longest context"),
    Range(name="kv_lora_rank", low=1, high=65536, why="DeepSeek-V3's is 512"),
    Range(name="qk_rope_head_dim", low=0, high=4096, why="DeepSeek-V3's is 64"),
    Range(name="qk_nope_head_dim", low=0, high=4096, why="DeepSeek-V3's is 128"),
    Range(
        name="sliding_window_pattern", low=1, high=1024, why="Gemma 3's is 6; at most the layers"
    ),
    Range(name="attn_layer_period", low=1, high=1024, why="Jamba's is 8; at most the layers"),
    Range(name="attn_layer_offset", low=0, high=1023, why="Jamba's is 4; below the period"),
)

#: The figures of a machine and an engine, given instead of measurements.
WHAT_IF_RANGES: tuple[Range, ...] = (
    Range(
        name="gpu_memory",
        low=512 << 20,
        high=4 << 40,
        unit="bytes",
        why="the largest single GPUs hold 288 GB (B300, MI355X); the smallest that serve "
        "models, a few GiB",
    ),
    Range(
        name="gpu_memory_utilization",
        low=0,
        high=1,
        integer=False,
        low_open=True,
        why="a fraction of the GPU's memory (vLLM refuses more than 1)",
    ),
    Range(
        name="block_size",
        low=1,
        high=65536,
        why="vLLM's --block-size choices stop at a few hundred tokens; hybrid models align "
        "attention blocks to the Mamba state, a few thousand",
    ),
    Range(
        name="tensor_parallel_size",
        low=1,
        high=1024,
        why="a node holds 8 GPUs (16 in some); the bound leaves two orders of magnitude",
    ),
)

#: Every range, by every name it goes by.
RANGES: dict[str, Range] = {
    name: r for r in (*MODEL_RANGES, *WHAT_IF_RANGES) for name in (r.name, *r.aliases)
}


def check(name: str, value: object, field: str | None = None) -> Any:
    """``value`` of the figure ``name`` when plausible; :class:`OutOfRange` naming ``field``.

    >>> check("block_size", 16)
    16
    """
    return RANGES[name].check(value, field or name)


def gpu_memory(value: object, field: str) -> int:
    """A GPU's memory given as a size (``"80GiB"``) or a number of bytes, in bytes, when plausible.

    :class:`OutOfRange` naming ``field`` and the range when it is out of range; for text
    that is no size, ``UsageError`` naming ``field`` with what a size looks like.
    """
    from errkb.units import SizeTooLargeError, parse_size

    memory = RANGES["gpu_memory"]
    if not isinstance(value, str):
        return int(memory.check(value, field))
    try:
        size = parse_size(value)
    except SizeTooLargeError:
        raise OutOfRange(field, memory.kind, memory.span, value) from None
    except UsageError as exc:
        raise UsageError(f"{field}: {exc}") from None
    try:
        return int(memory.check(size, field))
    except OutOfRange:
        raise OutOfRange(field, memory.kind, memory.span, value) from None
