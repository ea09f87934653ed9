"""errkb.probes.stack: distributions read from real metadata folders, and what pip check says.

Each test lays out a temporary site-packages of ``*.dist-info`` folders (tests/environments.py)
and reads only that folder, so the result depends on nothing installed here.
"""

from __future__ import annotations

from environments import write_dist

from errkb.probes.stack import Broken, read_stack


def test_a_pinned_torch_that_is_not_installed_is_broken(tmp_path):
    """vllm 0.6.3 pins torch 2.4.0; torch 2.5.1 is installed: a conflict, as pip check says."""
    write_dist(tmp_path, "torch", "2.5.1+cu124")
    write_dist(tmp_path, "vllm", "0.6.3", ("torch==2.4.0", "psutil"))
    write_dist(tmp_path, "psutil", "6.0.0")
    reading = read_stack([str(tmp_path)])
    assert (
        Broken(
            distribution="vllm",
            version="0.6.3",
            requirement="torch==2.4.0",
            required="torch",
            installed="2.5.1+cu124",
        ),
    ) == reading.broken


def test_a_missing_requirement_is_broken(tmp_path):
    """A requirement with nothing installed is reported with installed None."""
    write_dist(tmp_path, "transformers", "4.50.0", ("tokenizers<0.22,>=0.21",))
    (broken,) = read_stack([str(tmp_path)]).broken
    assert ("tokenizers", None) == (broken.required, broken.installed)


def test_extras_and_other_platforms_are_not_checked(tmp_path):
    """Markers are evaluated for this interpreter with no extra, as pip check does."""
    write_dist(
        tmp_path,
        "accelerate",
        "1.0.0",
        ('deepspeed; extra == "deepspeed"', 'pywin32; sys_platform == "win32"', "numpy>=1.17"),
    )
    write_dist(tmp_path, "numpy", "2.1.0")
    assert () == read_stack([str(tmp_path)]).broken


def test_a_local_version_satisfies_its_public_pin(tmp_path):
    """torch 2.13.0+cu126 satisfies torch==2.13.0 (PEP 440 ignores the local label)."""
    write_dist(tmp_path, "torch", "2.13.0+cu126")
    write_dist(tmp_path, "torchvision", "0.28.0", ("torch==2.13.0",))
    assert () == read_stack([str(tmp_path)]).broken


def test_only_the_stack_is_listed_but_everything_is_checked(tmp_path):
    """The stack's distributions are shown; a broken requirement elsewhere still counts."""
    write_dist(tmp_path, "torch", "2.13.0")
    write_dist(tmp_path, "somepkg", "1.0", ("missing-thing>=2",))
    reading = read_stack([str(tmp_path)])
    assert (["torch"], 2, ["somepkg"]) == (
        [d.name for d in reading.distributions],
        reading.checked,
        [b.distribution for b in reading.broken],
    )


def test_an_egg_info_requires_txt_is_read(tmp_path):
    """An egg-info's requirements come from requires.txt, its extras' sections left out."""
    egg = tmp_path / "apex-0.1.egg-info"
    egg.mkdir()
    (egg / "PKG-INFO").write_text("Metadata-Version: 1.0\nName: apex\nVersion: 0.1\n\n")
    (egg / "requires.txt").write_text("packaging>20.6\n\n[dev]\npytest\n")
    (broken,) = read_stack([str(tmp_path)]).broken
    assert ("apex", "packaging>20.6") == (broken.distribution, broken.requirement)
