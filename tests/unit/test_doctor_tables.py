"""errkb/advisors/environment/tables: the knowledge tables read, each row cited, the tables agreeing.

A row nobody could cite is not in a table, and the tables are checked against each other: no
torch build without the architectures it carries, no architecture without a rule for the GPUs
it runs on, no release missing inside the range a table covers.
"""

from __future__ import annotations

import json

import pytest

from errkb.advisors.environment._tables import TABLES, capability, tables


def test_every_row_of_every_table_cites_its_source():
    """principle 8: each fact says where it was read."""
    rows = [
        (f.name, r)
        for f in sorted(TABLES.glob("*.json"))
        for r in json.loads(f.read_text())["rows"]
    ]
    assert [] == [(name, row) for name, row in rows if not str(row.get("source", "")).strip()]


def test_no_torch_build_without_its_architectures():
    """Every CUDA build listed carries at least one architecture."""
    assert [] == [(b.torch, b.cuda) for b in tables().torch_builds if not b.capabilities]


def test_every_architecture_of_a_build_has_a_compatibility_rule():
    """The GPUs a build runs on are decided by a row read from torch, never by a default."""
    known = {rule.code for rule in tables().code_rules}
    assert set() == {c for b in tables().torch_builds for c in b.capabilities} - known


def test_no_release_missing_inside_the_range_of_torch_releases():
    """Every minor series between the first and the last release of the table is there."""
    minors = sorted({tuple(map(int, b.torch.split(".")[:2])) for b in tables().torch_builds})
    expected = [(minors[0][0], m) for m in range(minors[0][1], minors[-1][1] + 1)]
    assert expected == minors


def test_one_row_per_release_cuda_and_machine():
    """A build is listed once; a release keyed by machine has a row for each machine."""
    keys = [(b.torch, b.cuda, b.machine) for b in tables().torch_builds]
    assert len(keys) == len(set(keys))


def test_every_cuda_of_a_torch_build_has_a_driver_row():
    """The driver a build needs can always be told."""
    assert [] == [b.cuda for b in tables().torch_builds if tables().driver_row(b.cuda) is None]


def test_driver_rows_give_a_minimum_or_both_systems():
    """A CUDA runtime's oldest driver: a branch for every OS, or Linux and Windows apart."""
    bad = [r.cuda for r in tables().drivers if not r.minimum and not (r.linux and r.windows)]
    assert [] == bad


@pytest.mark.parametrize("system", ["linux", "windows"])
def test_every_cuda_of_a_torch_build_has_a_driver_minimum_on_each_system(system):
    """The driver verdict can always say what a build needs on Linux and on Windows."""
    known = tables()
    missing = {b.cuda for b in known.torch_builds if not known.driver_row(b.cuda).needed(system)}
    assert set() == missing


def test_an_exact_minimum_is_of_the_row_s_branch():
    """525.60.13 is of branch 525: the exact versions and the branch were read apart and agree."""
    rows = [r for r in tables().drivers if r.minimum]
    assert [] == [
        (r.cuda, v)
        for r in rows
        for v in (r.linux, r.windows)
        if v and int(v.split(".")[0]) < int(r.minimum or 0)
    ]


def test_every_driver_row_was_read_at_nvidia():
    """The driver minimums cite NVIDIA's own pages, one URL or more per row."""
    assert [] == [r.cuda for r in tables().drivers if "https://docs.nvidia.com/" not in r.source]


def test_gpu_names_are_unique():
    """One capability per model name."""
    names = [row.name.lower() for row in tables().gpus]
    assert len(names) == len(set(names))


@pytest.mark.parametrize(
    ("nvml_name", "expected"),
    [
        ("NVIDIA GeForce RTX 5090", (12, 0)),
        ("NVIDIA H100 80GB HBM3", (9, 0)),
        ("NVIDIA GeForce RTX 4070 Ti SUPER", (8, 9)),
        ("NVIDIA A10G", None),  # not "NVIDIA A10": a name ends where a word ends
        ("Tesla V100-SXM2-16GB", None),  # NVIDIA's page says "NVIDIA V100"
    ],
)
def test_a_gpu_name_as_nvml_reports_it(nvml_name, expected):
    """NVML's names carry the model name first; the longest listed model that starts it wins."""
    row = tables().gpu_capability(nvml_name)
    assert expected == (row.capability if row else None)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("8.6", (8, 6)),
        ("sm_90", (9, 0)),
        ("sm_90a", (9, 0)),
        ("compute_120", (12, 0)),
        ("sm_100f", (10, 0)),
    ],
)
def test_capability_reads_both_spellings(text, expected):
    """Table rows say 8.6; torch's architecture list says sm_86."""
    assert expected == capability(text)


def test_code_for_8_0_does_not_run_on_an_orin():
    """torch's rule: sm_80 code runs on 8.6 and 8.9, not on 8.7 (Jetson Orin)."""
    rule = tables().code_rule((8, 0))
    assert (True, True, False, False) == tuple(
        rule.runs_on(c) for c in ((8, 6), (8, 9), (8, 7), (9, 0))
    )


def _releases(distribution: str) -> list[str]:
    return [r.version for r in tables().extension_builds if r.distribution == distribution]


@pytest.mark.parametrize("distribution", ["vllm", "bitsandbytes", "xformers", "flash-attn"])
def test_extension_releases_are_listed_once_in_release_order(distribution):
    """One row a release, oldest first: a release is never listed with two builds."""
    from packaging.version import Version

    releases = _releases(distribution)
    assert sorted(set(releases), key=Version) == releases


@pytest.mark.parametrize(
    ("distribution", "series"),
    [
        ("vllm", [(0, m) for m in range(2, 34) if m not in (1, 15)]),
        ("bitsandbytes", [(0, m) for m in range(41, 51)]),
        ("flash-attn", [(2, m) for m in range(3, 9)]),
    ],
)
def test_no_release_series_missing_inside_an_extension_s_range(distribution, series):
    """Every minor series between the first and last release read is there (vLLM's 0.15 was not
    read, and its table says so)."""
    minors = sorted({tuple(map(int, v.split(".")[:2])) for v in _releases(distribution)})
    assert series == minors


def test_every_torch_a_vllm_release_pins_is_a_torch_release_of_the_mine_cache():
    """vLLM's pins name real torch releases: the ones whose wheels were read (2.1.2 to 2.14.0)."""
    pins = {
        r.torch.removeprefix("==") for r in tables().extension_builds if r.distribution == "vllm"
    }
    read = {"2.1.2", "2.2.1", "2.3.0", "2.3.1", "2.4.0", "2.5.1", "2.6.0", "2.7.0", "2.7.1",
            "2.8.0", "2.9.0", "2.9.1", "2.10.0", "2.11.0", "2.13.0", "2.14.0"}  # fmt: skip
    assert set() == pins - read


def test_an_extension_s_cuda_has_a_driver_row():
    """Every CUDA an extension was built for has the driver it needs in the driver table."""
    known = tables()
    assert set() == {
        c for r in known.extension_builds for c in r.cuda if known.driver_row(c) is None
    }


def test_no_xformers_release_missing_between_the_first_and_the_last_read():
    """xformers counts its releases in the third number: 0.0.23 to 0.0.35, each read."""
    series = sorted({tuple(map(int, v.split(".")[:3])) for v in _releases("xformers")})
    assert [(0, 0, p) for p in range(series[0][2], series[-1][2] + 1)] == series


def test_an_xformers_wheel_requires_the_torch_it_was_built_with():
    """The Requires-Dist pin and the torch in cpp_lib.json are read apart and agree."""
    from packaging.specifiers import SpecifierSet

    rows = [r for r in tables().extension_builds if r.distribution == "xformers"]
    assert [] == [r.version for r in rows if r.torch_builds[0] not in SpecifierSet(r.torch)]


@pytest.mark.parametrize("distribution", ["xformers", "flash-attn"])
def test_every_release_of_a_compiled_extension_names_its_torch_and_cuda(distribution):
    """A row of the wheels' tables says which torch and which CUDA its binaries were built with."""
    rows = [r for r in tables().extension_builds if r.distribution == distribution]
    assert [] == [r.version for r in rows if not r.torch_builds or not r.cuda]
