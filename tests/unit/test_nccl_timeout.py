"""The NCCL watchdog advisor: a timeout from the message's figures, after the usual cause."""

from __future__ import annotations

import pytest

from errkb.advisors.nccl_timeout import proposed_minutes
from errkb.diagnosis import explain
from errkb.options import Options

# As torch's watchdog prints them (ProcessGroupNCCL), from public reports.
REPORTED = [
    (("[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=BROADCAST, "
     "Timeout(ms)=1800000) ran for 1806103 milliseconds before timing out."), 61),
    (("[PG ID 0 PG GUID 0(default_pg) Rank 2] Watchdog caught collective operation timeout: "
     "WorkNCCL(SeqNum=12457, OpType=_ALLGATHER_BASE, NumelIn=262144, NumelOut=2097152, "
     "Timeout(ms)=600000) ran for 600034 milliseconds before timing out."), 21),
]  # fmt: skip


@pytest.mark.parametrize(("message", "minutes"), REPORTED)
def test_the_timeout_comes_after_finding_the_late_rank(message, minutes):
    diagnosis = explain(message, options=Options(probes=False))
    finding = diagnosis.findings[0]
    assert finding.record.id == "torch-nccl-watchdog-collective-timeout"
    texts = [s.text for s in finding.solutions]
    assert texts[0].startswith("Find the rank that did not arrive")  # the record's, still first
    computed = [s for s in finding.solutions if s.settings]
    assert computed[0].settings == {"timeout": f"datetime.timedelta(minutes={minutes})"}
    assert texts.index(computed[0].text) == len(texts) - 1
    facts = {f.name: f for f in finding.facts}
    assert facts["proposed_timeout"].value == minutes
    assert facts["timeout"].source == "message"


def test_the_proposal_covers_what_the_collective_waited():
    assert proposed_minutes(600_000, 600_048) == 21
    assert proposed_minutes(1_800_000, 5_400_000) == 180  # it waited longer than the timeout
