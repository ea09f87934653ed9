"""A new model class on an old transformers: the twenty newest model classes errkb knows.

`ImportError: cannot import name 'X' from 'transformers'` is one of the most reported errors:
a model newer than the installed transformers. For each of the twenty model classes that the
newest mined release of transformers added most recently, the shipped records say which
release added it and pin the upgrade to that release. The releases were checked in the wheels
(the release before lacks the name, the one named has it: `nox -s audit` re-checks them).
"""

from __future__ import annotations

import pytest

from errkb.diagnosis import explain
from errkb.options import Options

#: (class, the release that added it, the release before it), newest first: the twenty model
#: classes the shipped transformers pack says were added most recently. Each was checked in the
#: wheels: `class X` is in 5.24.0's transformers/models/, and in no file of 5.23.0's.
NEWEST = [
    ("WavTokenizerModel", "5.24.0", "5.23.0"),
    ("WavTokenizerEncoderModel", "5.24.0", "5.23.0"),
    ("OmniASRModel", "5.24.0", "5.23.0"),
    ("OmniASRForConditionalGeneration", "5.24.0", "5.23.0"),
    ("OmniASRForCTC", "5.24.0", "5.23.0"),
    ("OmniASRCTCModel", "5.24.0", "5.23.0"),
    ("OmniASRAudioModel", "5.24.0", "5.23.0"),
    ("LaraMiniModel", "5.24.0", "5.23.0"),
    ("LaraMiniForCausalLM", "5.24.0", "5.23.0"),
    ("Inkling2LoopTextModel", "5.24.0", "5.23.0"),
    ("Inkling2LoopModel", "5.24.0", "5.23.0"),
    ("Inkling2LoopForConditionalGeneration", "5.24.0", "5.23.0"),
    ("Inkling2LoopForCausalLM", "5.24.0", "5.23.0"),
    ("HYV4VLVisionModel", "5.24.0", "5.23.0"),
    ("HYV4VLTextModel", "5.24.0", "5.23.0"),
    ("HYV4VLModel", "5.24.0", "5.23.0"),
    ("HYV4VLForConditionalGeneration", "5.24.0", "5.23.0"),
    ("DoryModel", "5.24.0", "5.23.0"),
    ("DoryForCausalLM", "5.24.0", "5.23.0"),
    ("BeamForTokenClassification", "5.24.0", "5.23.0"),
]


@pytest.mark.parametrize(("name", "added", "before"), NEWEST, ids=[n for n, _, _ in NEWEST])
def test_a_new_model_class_names_the_release_that_added_it(name, added, before) -> None:
    """The top finding is transformers' added-name record, its fix the upgrade to that release."""
    where = "/home/u/.venv/lib/python3.11/site-packages/transformers/__init__.py"
    text = f"ImportError: cannot import name '{name}' from 'transformers' ({where})"
    diagnosis = explain(text, options=Options(probes=False))
    assert diagnosis is not None
    record = diagnosis.top.record
    assert record.skew is not None
    assert ("added", f"transformers.{name}", added) == (
        record.skew.change,
        record.skew.name,
        record.skew.changed_in,
    )
    assert before == record.skew.last_before
    assert diagnosis.top.fix is not None
    assert f"pip install 'transformers>={added}'" == diagnosis.top.fix.text


#: Well-known ones users report, checked in the wheels of the release before and the one named.
REPORTED = [
    ("Qwen2_5_VLForConditionalGeneration", "4.49.0", "4.48.3"),
    ("Gemma3ForConditionalGeneration", "4.50.0", "4.49.0"),
]


@pytest.mark.parametrize(("name", "added", "before"), REPORTED, ids=[n for n, _, _ in REPORTED])
def test_a_reported_new_model_names_the_release_that_added_it(name, added, before) -> None:
    """`cannot import name 'Qwen2_5_VLForConditionalGeneration'`: upgrade to 4.49.0."""
    test_a_new_model_class_names_the_release_that_added_it(name, added, before)
