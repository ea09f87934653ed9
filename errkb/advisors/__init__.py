"""Advisors: callables that turn a match and its evidence into tailored advice.

An advisor is any callable ``(match, evidence) -> Advice | None``. Records name the advisors
that apply to them (``"advisors": ["kv-cache"]``); the names are looked up in the static table
:data:`BUILTIN` and then in the entry-point group ``errkb.advisors``. Nothing named by a record
is imported unless it is in one of those two places.

The contract between a record and an advisor is declared, not guessed: :func:`advisor` marks a
callable with its :class:`Contract` (its name, and the :class:`Variant` forms of message it
works on, each with the capture groups it requires and reads), built once and used by the
advisor itself to tell which form a match has. ``errkb validate`` checks that
every advisor a record names exists and that the record's pattern has the groups of one of its
variants (:func:`check`); the advisor learns which variant it has from
:meth:`Contract.variant_for`. A plugin advisor without a declaration is taken to require no
group (it reads whatever the match has).
"""

from __future__ import annotations

import importlib
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

from errkb import _plugins
from errkb._attrs import attrs
from errkb._env import flag
from errkb.advisors._versions import elsewhere_fix, version_facts
from errkb.findings import ExampleFix, Fact, Finding, Solution

if TYPE_CHECKING:
    from collections.abc import Collection, Iterable, Mapping

    from errkb.evidence import Evidence
    from errkb.match import Match

__all__ = [
    "BUILTIN",
    "ENTRY_POINT_GROUP",
    "Advice",
    "Advisor",
    "CaptureError",
    "Captures",
    "Contract",
    "Variant",
    "advisor",
    "check",
    "contract_of",
    "load",
    "run_advisors",
]

ENTRY_POINT_GROUP = "errkb.advisors"

#: Built-in advisors: name -> "module:attribute", imported on first use.
BUILTIN: dict[str, str] = {
    "environment": "errkb.advisors.environment:advise",
    "kv-cache": "errkb.advisors.kv_cache:advise",
    "nccl-timeout": "errkb.advisors.nccl_timeout:advise",
    "out-of-memory": "errkb.advisors.out_of_memory:advise",
    "python-import": "errkb.advisors.python_import:advise",
    "python-raised": "errkb.advisors.python_raised:advise",
}


@attrs.frozen(kw_only=True)
class Advice:
    """What an advisor adds: solutions, facts, an example fix.

    ``placement`` says where its solutions go: ``"before"`` the record's own (the first is
    then the Fix line: a fix computed for this run), or ``"after"`` them (the record's first
    solution is the usual cause, the advisor's a computed alternative). Its facts are added to
    the message's capture facts, never in their place.
    """

    solutions: tuple[Solution, ...] = ()
    placement: Literal["before", "after"] = attrs.field(
        default="before", validator=attrs.validators.in_(("before", "after"))
    )
    facts: tuple[Fact, ...] = ()
    example_fix: ExampleFix | None = None
    notes: tuple[str, ...] = ()
    #: Show no example at all, not even the record's own: its figures would mislead here (the
    #: message's numbers contradict each other, so no fix was worked out).
    withhold_example: bool = False


class Advisor(Protocol):
    """The advisor protocol."""

    def __call__(self, match: Match, evidence: Evidence, /) -> Advice | None:
        """Advice for ``match``, or None when the evidence supports none."""


def _names(value: Iterable[str]) -> frozenset[str]:
    return frozenset(value)


def _variants(value: Iterable[Variant]) -> tuple[Variant, ...]:
    return tuple(value)


@attrs.frozen(kw_only=True)
class Variant:
    """One form of the message an advisor works on, told apart by its capture groups.

    Attributes:
        name: what the advisor calls this form.
        requires: the named groups a match must have captured for this form.
        reads: further named groups the advisor uses when they captured something.
    """

    name: str
    requires: frozenset[str] = attrs.field(default=frozenset(), converter=_names)
    reads: frozenset[str] = attrs.field(default=frozenset(), converter=_names)


@attrs.frozen(kw_only=True)
class Contract:
    """What an advisor is called and which forms of message (variants) it works on.

    The variants are tried in order; the first whose required groups all captured a value is
    the one a match has, so more specific forms come first.
    """

    name: str
    variants: tuple[Variant, ...] = attrs.field(converter=_variants)

    @variants.validator
    def _check(self, _: object, value: tuple[Variant, ...]) -> None:
        if not value or not all(isinstance(v, Variant) for v in value):
            raise ValueError(f"advisor {self.name!r}: variants must be one or more Variant")

    def variant_for(self, captures: Mapping[str | int, object]) -> Variant | None:
        """The first variant whose required groups all captured a value in ``captures``."""
        for variant in self.variants:
            if all(captures.get(group) is not None for group in variant.requires):
                return variant
        return None

    def problem_with(self, groups: Collection[str]) -> str | None:
        """Why a pattern with the named ``groups`` cannot serve this advisor, or None if it can."""
        if any(variant.requires <= set(groups) for variant in self.variants):
            return None
        wanted = " or ".join(
            "{" + ", ".join(sorted(v.requires)) + "}" for v in self.variants if v.requires
        )
        return f"the pattern lacks the groups advisor {self.name!r} needs: {wanted}"


class CaptureError(ValueError):
    """A capture an advisor reads is not of the type it asked for: a problem, not a crash."""


class Captures:
    """A match's captures read as the types an advisor works with.

    Each reader gives ``None`` when the group captured nothing, and raises
    :class:`CaptureError` when it captured something that is not of the type asked for:
    :func:`run_advisors` reports that as a note and goes on without the advisor. A size is a
    number in group ``name`` with its unit in ``name_unit`` (``19.68`` and ``GiB``), or one text
    (``24GiB``).

    >>> caps = Captures({"layers": 32, "free": 1.5, "free_unit": "GiB"})
    >>> caps.integer("layers"), caps.size("free"), caps.integer("missing")
    (32, 1610612736, None)
    """

    def __init__(self, captures: Mapping[str | int, object]) -> None:
        self._captures = captures

    def _raw(self, name: str) -> object:
        value = self._captures.get(name)
        return None if value is None or value == "" else value

    def integer(self, name: str) -> int | None:
        """The capture as a whole number."""
        value = self._raw(name)
        if value is None or (isinstance(value, int) and not isinstance(value, bool)):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise CaptureError(f"capture {name!r} is not a whole number: {value!r}")

    def number(self, name: str) -> float | None:
        """The capture as a number."""
        value = self._raw(name)
        if value is None:
            return None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise CaptureError(f"capture {name!r} is not a number: {value!r}")

    def size(self, name: str) -> int | None:
        """The capture as bytes: a number and its unit (``name_unit``), or one text."""
        from errkb.exceptions import UsageError
        from errkb.units import parse_size, to_bytes

        value = self._raw(name)
        if value is None:
            return None
        unit = self._captures.get(f"{name}_unit")
        try:
            if isinstance(value, (int, float)) and isinstance(unit, str):
                return to_bytes(value, unit)
            if isinstance(value, str):
                return parse_size(value)
        except (UsageError, OverflowError, ValueError) as exc:
            raise CaptureError(f"capture {name!r} is not a size: {exc}") from None
        raise CaptureError(f"capture {name!r} is not a size: {value!r} {unit!r}")

    def text(self, name: str) -> str | None:
        """The capture as text (a number as it was written)."""
        value = self._raw(name)
        return None if value is None else str(value)


F = TypeVar("F", bound=Callable[..., Any])


def advisor(contract: Contract) -> Callable[[F], F]:
    """Declare a callable the advisor of ``contract``: its name and the variants it works on.

    >>> WIDGET = Contract(name="widget", variants=(Variant(name="speed", requires={"speed"}),))
    >>> @advisor(WIDGET)
    ... def advise(match, evidence):
    ...     return None
    >>> contract_of(advise, "widget") is WIDGET
    True
    """
    if not isinstance(contract, Contract):
        raise TypeError(f"advisor() takes a Contract, got {contract!r}")

    def mark(func: F) -> F:
        func.errkb_contract = contract  # type: ignore[attr-defined]
        return func

    return mark


def contract_of(obj: object, name: str) -> Contract:
    """The contract ``obj`` declares; for an undeclared plugin, one that requires no group.

    Raises ``TypeError`` when the declaration is not a :class:`Contract` or names another
    advisor (checked when the advisor is loaded, as pluggy checks hooks at registration).
    """
    declared = getattr(obj, "errkb_contract", None)
    if declared is None:
        return Contract(name=name, variants=(Variant(name="any"),))
    if not isinstance(declared, Contract):
        raise TypeError(f"advisor {name!r}: errkb_contract is not a Contract: {declared!r}")
    if declared.name != name:
        raise TypeError(f"advisor {name!r} declares the name {declared.name!r}")
    return declared


_cache: dict[str, Advisor] = {}
_lock = threading.Lock()


def load(name: str) -> Advisor:
    """The advisor called ``name``: built-in first, then the ``errkb.advisors`` entry points."""
    with _lock:
        if name in _cache:
            return _cache[name]
        target = BUILTIN.get(name)
        obj: Any
        if target is not None:
            module, _, attr = target.partition(":")
            obj = importlib.import_module(module)
            for part in attr.split(".") if attr else ():
                obj = getattr(obj, part)
        else:
            ep = _plugins.find(ENTRY_POINT_GROUP, name)
            if ep is None:
                raise LookupError(f"no advisor named {name!r}")
            target = ep.value
            obj = _plugins.load(ENTRY_POINT_GROUP, ep)
        if not callable(obj):
            raise TypeError(f"advisor {name!r} ({target}) is not callable")
        contract_of(obj, name)
        _cache[name] = obj
        return obj  # type: ignore[no-any-return]


def check(name: str, pattern_groups: Collection[str]) -> str | None:
    """Why a record whose pattern has ``pattern_groups`` cannot name advisor ``name``, or None.

    The advisor must exist (built in, or an installed plugin that loads) and the pattern must
    have the required groups of one of its variants.
    """
    try:
        obj = load(name)
    except LookupError:
        known = sorted({*BUILTIN, *(ep.name for ep in _plugins.entry_points(ENTRY_POINT_GROUP))})
        return f"no advisor named {name!r} (known: {', '.join(known)})"
    except (_plugins.PluginError, TypeError) as exc:
        return f"advisor {name!r} cannot be loaded: {exc}"
    return contract_of(obj, name).problem_with(pattern_groups)


def run_advisors(
    findings: list[Finding], evidence: Evidence, deadline: float, notes: list[str]
) -> list[Finding]:
    """Apply the advisors of the best finding of each exception, until ``deadline``.

    A best finding whose record names a distribution (``versions``, ``skew``) also gets the
    installed release of it as facts (:mod:`errkb.advisors._versions`), and a skew record whose
    name the installed release has gets, as its fix, the way to find the other copy imported.

    The other findings of an exception are alternatives, listed but not worked out, so an
    exception costs one advisor run however many records it matched.
    """
    out: list[Finding] = []
    advised: set[int] = set()
    for found in findings:
        finding = found
        if finding.exception in advised:
            out.append(finding)
            continue
        advised.add(finding.exception)
        for name in finding.record.advisors:
            if time.monotonic() >= deadline:
                notes.append(f"advisor {name!r} for {finding.record.id} left out: out of time")
                continue
            try:
                advice = load(name)(finding.match, evidence)
            except _plugins.PluginError:
                continue  # a broken plugin: reported once, in one line, by errkb._plugins
            except CaptureError as exc:
                notes.append(f"advisor {name!r} for {finding.record.id}: {exc}")
                continue
            except Exception as exc:
                notes.append(f"advisor {name!r} failed: {type(exc).__name__}: {exc}")
                if flag("ERRKB_DEBUG"):
                    import traceback

                    traceback.print_exc()
                continue
            if advice is not None:
                finding = attrs.evolve(
                    finding,
                    solutions=advice.solutions + finding.solutions
                    if advice.placement == "before"
                    else finding.solutions + advice.solutions,
                    facts=finding.facts + advice.facts,
                    example_fix=None
                    if advice.withhold_example
                    else advice.example_fix or finding.example_fix,
                )
                notes.extend(n for n in advice.notes if n not in notes)
        if finding.record.versions is not None or finding.record.skew is not None:
            finding = attrs.evolve(
                finding,
                facts=finding.facts + version_facts(finding.record, evidence),
                fix=elsewhere_fix(finding.record, evidence) or finding.fix,
            )
        out.append(finding)
    return out
