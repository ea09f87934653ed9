"""errkb.diagnosis: the orchestrator, and notes that belong to one diagnosis."""

from __future__ import annotations

import pytest

import errkb
from errkb.options import Options
from errkb.testing import record_dict, registry_from_dicts

# A pattern that backtracks for ages on a long run of "a" that does not end the text.
EVIL = record_dict(id="evil", errorMessage="aaa", messagePattern=r"aaa(a|aa)+$")
PLAIN = record_dict(id="plain", errorMessage="gear slipped", messagePattern=r"gear slipped")


def test_a_pattern_timeout_is_noted_only_in_the_diagnosis_it_happened_in():
    """A later, unrelated diagnosis does not repeat an earlier one's timeout note."""
    registry = registry_from_dicts([EVIL, PLAIN])
    registry.matcher.timeout = 0.01
    first = errkb.explain(
        "gear slipped after " + "a" * 40 + "!", registry=registry, options=Options()
    )
    assert first is not None
    assert any("ran past their timeout" in n and "evil" in n for n in first.notes)
    second = errkb.explain("gear slipped", registry=registry, options=Options())
    assert second is not None
    assert not any("timeout" in n for n in second.notes)
    assert {"evil"} == registry.matcher.skipped.timed_out


def test_a_solution_the_message_cannot_fill_comes_after_those_it_can():
    """A message cut before the figures a solution names (an issue title that ends after the
    request, as torch's own message begins) puts the solutions it fills whole first: the Fix
    line shows no placeholder. The whole message fills it, placeholders nowhere."""
    from errkb.diagnosis import explain

    record = errkb.lookup("CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a")[0].record
    first = record.solutions[0]
    assert "{free}" in first  # the record's first solution names the free memory

    cut = explain(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB",
        options=Options(probes=False),
    )
    solutions = [s.text for s in cut.top.solutions]
    assert "<" not in solutions[0]
    assert solutions[-1].startswith("Compare the request, 20 MiB, with what is free, <free>")

    whole = explain(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a "
        "total capacity of 7.79 GiB of which 3.56 MiB is free. Including non-PyTorch memory, "
        "this process has 7.78 GiB memory in use. Of the allocated memory 7.59 GiB is allocated "
        "by PyTorch, and 45.84 MiB is reserved by PyTorch but unallocated.",
        options=Options(probes=False),
    )
    texts = [s.text for s in whole.top.solutions]
    assert not any("<" in text for text in texts)
    assert any(
        t.startswith("Compare the request, 20 MiB, with what is free, 3.56 MiB of 7.79 GiB")
        for t in texts
    )


# Issue titles that end where torch's first sentence does (the report's URL beside each).
_OOM_TITLES = [
    # https://github.com/vllm-project/vllm/issues/17835
    "[Bug]: torch.OutOfMemoryError: CUDA out of memory",
    # https://github.com/vllm-project/vllm/issues/11560
    "[Usage]: torch.OutOfMemoryError: CUDA out of memory.",
    # https://github.com/datalab-to/chandra/issues/35
    "error torch.OutOfMemoryError: CUDA out of memory.",
]


@pytest.mark.parametrize("title", _OOM_TITLES)
def test_an_out_of_memory_title_cut_after_its_first_sentence_is_torchs(title):
    """torch's message always goes on ('Tried to allocate ...'); a title keeps its first
    sentence only. It is still torch's CUDA out-of-memory error, and the Fix line names no
    figure the title does not have."""
    from errkb.diagnosis import explain

    found = explain(title, options=Options(probes=False))
    assert "torch-cuda-out-of-memory" == found.top.record.id
    assert "<" not in found.top.solutions[0].text


def test_out_of_memory_words_that_go_on_otherwise_are_not_claimed():
    """'CUDA out of memory' followed by other words than torch's is not its message cut short
    (a title that goes on in the reporter's words: WeChatCV/Stand-In#42)."""
    found = errkb.lookup("CUDA out of memory with 48G GPU")
    assert "torch-cuda-out-of-memory" not in [m.record.id for m in found]
