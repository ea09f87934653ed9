"""errkb._sites: the raise site of the release in use, not the newest release's.

The record is vLLM's real "Failed to import from vllm._C" log (records/mined/vllm.jsonl): up to
0.9.2 it is raised in ``vllm/_custom_ops.py``, from 0.11.2 in ``vllm/platforms/rocm.py``, and
its ``filePath`` and ``githubUrl`` are 0.33.0's. A vLLM 0.9 user must read ``_custom_ops.py``.
"""

from __future__ import annotations

import attrs
import pytest
from helpers import VLLM_C_MESSAGE as MESSAGE
from helpers import VLLM_C_RECORD as VLLM

import errkb
from errkb import Options
from errkb._sites import link, link_release, site_for
from errkb.records import record_from_dict
from errkb.testing import FakeMeasurements, record_dict, registry_from_dicts

BLOB = "https://github.com/vllm-project/vllm/blob"


def _installed(**versions: str) -> Options:
    """Options whose installed probe reads ``versions`` (no metadata is read)."""
    return Options(measurements=FakeMeasurements(readings={"installed": versions}))


def _explain(text: str, options: Options | None = None):
    diagnosis = errkb.explain(
        text, registry=registry_from_dicts([VLLM]), options=options or Options(probes=False)
    )
    assert diagnosis is not None
    return diagnosis.top.site


def test_under_the_hook_the_installed_release_decides():
    """A live exception: the installed 0.9.2 raises it in _custom_ops.py, linked at v0.9.2."""
    try:
        raise RuntimeError(MESSAGE)
    except RuntimeError as e:
        diagnosis = errkb.diagnose(
            e, registry=registry_from_dicts([VLLM]), options=_installed(vllm="0.9.2")
        )
    site = diagnosis.top.site
    assert ("0.9.2", "installed", True) == (site.release, site.basis, site.raises)
    assert ("vllm/_custom_ops.py", 20) == (site.file, site.line)
    assert f"{BLOB}/v0.9.2/vllm/_custom_ops.py#L20" == site.url


def test_a_release_the_paste_states_decides():
    """vLLM's banner in the pasted log: 0.7.3's site, not the newest."""
    site = _explain(
        "INFO 07-01 12:00:00 [api_server.py:1287] vLLM API server version 0.7.3\n"
        f"WARNING 07-01 12:00:01 [_custom_ops.py:21] {MESSAGE}"
    )
    assert ("0.7.3", "stated", "vllm/_custom_ops.py", 21) == (
        site.release,
        site.basis,
        site.file,
        site.line,
    )
    assert f"{BLOB}/v0.7.3/vllm/_custom_ops.py#L21" == site.url


def test_a_stated_release_comes_before_the_installed_one():
    """A pasted text says what ran; this machine's installed release is only a fallback."""
    text = f"Initializing a V1 LLM engine (v0.7.3) with config: model='m'\n{MESSAGE}"
    site = _explain(text, _installed(vllm="0.33.0"))
    assert ("0.7.3", "stated") == (site.release, site.basis)
    site = _explain(MESSAGE, _installed(vllm="0.33.0"))
    assert ("0.33.0", "installed", "vllm/platforms/rocm.py", 58) == (
        site.release,
        site.basis,
        site.file,
        site.line,
    )


def test_the_traceback_paths_narrow_the_releases():
    """A frame in vllm/platforms/rocm.py at line 39: the releases from 0.11.2 to before 0.33.0."""
    text = (
        "Traceback (most recent call last):\n"
        '  File "/app/main.py", line 1, in <module>\n'
        '  File "/venv/lib/python3.12/site-packages/vllm/platforms/rocm.py", line 39, in <module>\n'
        f"RuntimeError: {MESSAGE}"
    )
    site = _explain(text)
    assert ("traceback", "0.11.2", "0.33.0") == (site.basis, site.release, site.until)
    assert ("vllm/platforms/rocm.py", 39) == (site.file, site.line)
    assert f"{BLOB}/v0.11.2/vllm/platforms/rocm.py#L39" == site.url


def test_with_no_release_known_the_site_is_the_range():
    """Nothing says which release: every file and its lines, not the newest site."""
    site = _explain(MESSAGE)
    assert (None, None, None) == (site.release, site.file, site.url)
    assert (
        "vllm/_custom_ops.py:17-21 (0.5.5 to before 0.11.2)",
        "vllm/platforms/rocm.py:39-58 (0.11.2 on)",
    ) == site.spread


def test_a_release_outside_the_range_does_not_raise_it():
    """A release before the first that raises it gets no site, and says so."""
    site = _explain(MESSAGE, _installed(vllm="0.4.0"))
    assert ("0.4.0", False, None) == (site.release, site.raises, site.file)
    assert 2 == len(site.spread)


def test_two_different_stated_releases_state_none():
    """A text stating vllm 0.7.3 and 0.11.2 does not say which ran: the range."""
    text = f"vllm==0.7.3\nvLLM API server version 0.11.2\n{MESSAGE}"
    assert _explain(text).release is None


@pytest.mark.parametrize(
    ("release", "path", "line", "expected"),
    [
        (
            "4.36.2",
            "transformers/activations.py",
            41,
            "https://github.com/huggingface/transformers/blob/v4.36.2/src/transformers/activations.py#L41",
        ),
        (  # the newest release's own link keeps its span
            "4.51.3",
            "transformers/activations.py",
            40,
            "https://github.com/huggingface/transformers/blob/v4.51.3/src/transformers/activations.py#L40-L43",
        ),
        (
            "4.45.2+cu121",
            "transformers/activations.py",
            40,
            "https://github.com/huggingface/transformers/blob/v4.45.2/src/transformers/activations.py#L40",
        ),
        ("4.46.0.dev0", "transformers/activations.py", 40, None),  # a build with no tag
    ],
)
def test_the_link_is_rebuilt_at_the_releases_tag(release, path, line, expected):
    """The tag form and the repository folder (``src/``) come from the record's own link."""
    record, _ = record_from_dict(
        record_dict(
            filePath="transformers/activations.py",
            lineNumber=40,
            githubUrl="https://github.com/huggingface/transformers/blob/v4.51.3/src/"
            "transformers/activations.py#L40-L43",
        )
    )
    assert expected == link(record, release, path, line)


def test_a_tag_without_a_v_keeps_its_form():
    """bitsandbytes tags releases without a ``v``."""
    record, _ = record_from_dict(
        record_dict(
            filePath="bitsandbytes/functional.py",
            lineNumber=10,
            githubUrl="https://github.com/bitsandbytes-foundation/bitsandbytes/blob/0.50.2/"
            "bitsandbytes/functional.py#L10",
        )
    )
    assert (
        "https://github.com/bitsandbytes-foundation/bitsandbytes/blob/0.43.1/bitsandbytes/functional.py#L7"
        == link(record, "0.43.1", "bitsandbytes/functional.py", 7)
    )


def test_a_record_without_versions_has_no_site():
    """Only records that say which releases raise them get a site."""
    record, _ = record_from_dict(record_dict())
    assert site_for(record, known=[("1.0", "installed")]) is None


def test_one_file_whose_sites_stop_short_says_the_releases_it_was_read_in():
    """vLLM's V0 message is mined one record a file, each with the message's whole range.

    Its llm_engine.py record lists that file at 0.2.7 and 0.3.3 (worker.py raised it from 0.4.1
    on, another record): the range beside the file would say llm_engine.py raised it to 0.10.2.
    Its own link is at v0.3.3, and is said to be.
    """
    record, _ = record_from_dict(
        record_dict(
            id="mined-vllm-engine",
            repo="vllm-project/vllm",
            filePath="vllm/engine/llm_engine.py",
            lineNumber=366,
            githubUrl=f"{BLOB}/v0.3.3/vllm/engine/llm_engine.py#L366",
            versions={
                "distribution": "vllm",
                "first": "0.2.7",
                "last": "0.10.2",
                "checked": "0.33.0",
                "sites": {"0.2.7": "vllm/engine/llm_engine.py:284", "0.3.3": ":366"},
            },
        )
    )
    site = site_for(record)
    assert ("vllm/engine/llm_engine.py:284-366 (read there in 0.2.7 to 0.3.3)",) == site.spread
    assert "vllm 0.2.7 to 0.10.2" == site.releases()  # the message's, said apart from the file
    assert link_release(record) == "0.3.3"
    # A file listed up to the record's last release needs no such words.
    whole = attrs.evolve(record, versions=attrs.evolve(record.versions, last="0.3.3"))
    assert ("vllm/engine/llm_engine.py:284-366",) == site_for(whole).spread
