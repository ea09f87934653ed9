"""The NCCL watchdog advisor: the timeout a slow but healthy run needs, after the usual cause.

When a collective (an all-reduce, a broadcast) waits longer than the process group's timeout,
the NCCL watchdog of each waiting rank reports it and tears the job down:

    [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5,
    OpType=BROADCAST, Timeout(ms)=1800000) ran for 1806103 milliseconds before timing out.

Most often a rank never arrived (it crashed, hung, or took another code path), and the record's
first solution, find that rank, stays the fix: this advisor's solution goes after it
(``placement="after"``). When one rank was legitimately slow (rank 0 saving a checkpoint or
running an evaluation the others wait for), the timeout must cover that phase: the advisor
proposes one from the message's figures, twice the one that ran out, in whole minutes.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from errkb.advisors import Advice, Captures, Contract, Variant, advisor
from errkb.findings import Fact, Solution

if TYPE_CHECKING:
    from errkb.evidence import Evidence
    from errkb.match import Match

__all__ = ["CONTRACT", "advise", "proposed_minutes"]

CONTRACT = Contract(
    name="nccl-timeout",
    variants=(
        Variant(
            name="timed-out",
            requires={"timeout_ms", "elapsed_ms"},
            reads={"rank", "seq_num", "op_type"},
        ),
        Variant(name="watchdog", requires={"rank"}),
    ),
)

#: How much longer than the timeout that ran out the proposed one is.
FACTOR = 2


def proposed_minutes(timeout_ms: int, elapsed_ms: int) -> int:
    """The proposed timeout, in whole minutes: :data:`FACTOR` times the longer of the two.

    >>> proposed_minutes(600_000, 600_048)  # the 10 minutes of torch's default NCCL timeout
    21
    """
    return math.ceil(FACTOR * max(timeout_ms, elapsed_ms) / 60_000)


@advisor(CONTRACT)
def advise(match: Match, evidence: Evidence) -> Advice | None:
    """A longer ``timeout=`` for ``init_process_group``, placed after finding the late rank."""
    del evidence  # the message holds every figure
    caps = Captures(match.captures)
    timeout_ms, elapsed_ms = caps.integer("timeout_ms"), caps.integer("elapsed_ms")
    if timeout_ms is None or elapsed_ms is None or timeout_ms <= 0:
        return None
    minutes = proposed_minutes(timeout_ms, elapsed_ms)
    facts = [
        Fact(name="timeout", value=timeout_ms, unit="ms", source="message"),
        Fact(name="waited", value=elapsed_ms, unit="ms", source="message"),
        Fact(name="proposed_timeout", value=minutes, unit="minutes", source="computed",
             note=f"{FACTOR} x the longer of the two, whole minutes"),
    ]  # fmt: skip
    for name in ("rank", "seq_num"):
        value = caps.integer(name)
        if value is not None:
            facts.append(Fact(name=name, value=value, source="message"))
    op = caps.text("op_type")
    if op is not None:
        facts.append(Fact(name="op_type", value=op, source="message"))
    setting = f"datetime.timedelta(minutes={minutes})"
    solution = Solution(
        text=f"If every rank is healthy and one is only slow (rank 0 saving or evaluating while "
        f"the others wait), give the process group a timeout that covers it: "
        f"init_process_group(..., timeout={setting}), twice the "
        f"{max(timeout_ms, elapsed_ms) / 60_000:.1f} minutes this collective waited.",
        settings={"timeout": setting},
    )
    # No example of its own: the one shown goes with the Fix line, the record's first solution.
    return Advice(solutions=(solution,), facts=tuple(facts), placement="after")
