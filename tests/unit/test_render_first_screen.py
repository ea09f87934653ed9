"""The first screen of a mined match: a title in words, a Fix, where, and which releases.

Rendered at 100 columns into a string, plain (``color=False``) and through rich (``color=True``,
a rich Console over the same ``io.StringIO``); the JSON carries the same fields.
"""

from __future__ import annotations

import io
import json
import re

import pytest
from helpers import VLLM_C_MESSAGE as MESSAGE
from helpers import VLLM_C_RECORD as VLLM

import errkb
from errkb import Options
from errkb.render import render, render_json
from errkb.testing import FakeMeasurements, record_dict, registry_from_dicts

BNB = record_dict(
    id="mined-transformers-4e62fca955f2",
    slug="calling-cuda-is-not-supported-for-4-bit-a955f2",
    repo="huggingface/transformers",
    errorMessage="Calling `cuda()` is not supported for `4-bit` quantized models with the "
    "installed version of bitsandbytes. The current device is `{self.device}`. If you intended "
    "to move the model, please install bitsandbytes >= 0.43.2.",
    messagePattern=r"Calling `cuda\(\)` is not supported for `4\-bit` quantized models with the "
    r"installed version of bitsandbytes\. The current device is `(?P<device>.+?)`\. If you "
    r"intended to move the model, please install bitsandbytes >= 0\.43\.2\.",
    errorClass="ValueError",
    filePath="transformers/modeling_utils.py",
    lineNumber=4275,
    githubUrl="https://github.com/huggingface/transformers/blob/v4.57.3/src/transformers/"
    "modeling_utils.py#L4275",
    documentation="Raised by PreTrainedModel.cuda when getattr(self, "
    '"quantization_method", None) == QuantizationMethod.BITS_AND_BYTES.',
    tags=["mined", "raise", "python"],
    versions={
        "distribution": "transformers",
        "first": "4.46.3",
        "last": "4.57.3",
        "checked": "5.24.0",
        "sites": {"4.46.3": "transformers/modeling_utils.py:3065", "4.57.3": ":4275"},
    },
)
BNB_MESSAGE = (
    "ValueError: Calling `cuda()` is not supported for `4-bit` quantized models with the "
    "installed version of bitsandbytes. The current device is `cuda:0`. If you intended to move "
    "the model, please install bitsandbytes >= 0.43.2."
)
QUANT = record_dict(
    id="mined-bitsandbytes-f1a7afded1f8",
    slug="quant-state-is-required-ded1f8",
    errorMessage="quant_state is required",
    messagePattern="quant_state is required",
    errorClass="ValueError",
    filePath="bitsandbytes/autograd/_functions.py",
    lineNumber=415,
    githubUrl="https://github.com/bitsandbytes-foundation/bitsandbytes/blob/0.50.2/"
    "bitsandbytes/autograd/_functions.py#L415",
    documentation="Raised by matmul_4bit when quant_state is None.",
    tags=["mined", "raise", "python"],
    versions={
        "distribution": "bitsandbytes",
        "first": "0.50.2",
        "checked": "0.50.2",
        "sites": {"0.50.2": "bitsandbytes/autograd/_functions.py:415"},
    },
)


def _screen(text: str, records: list[dict], *, color: bool = False, **installed: str) -> str:
    options = (
        Options(measurements=FakeMeasurements(readings={"installed": installed}))
        if installed
        else Options(probes=False)
    )
    diagnosis = errkb.explain(text, registry=registry_from_dicts(records), options=options)
    assert diagnosis is not None
    out = io.StringIO()
    render(diagnosis, Options(file=out, color=color, width=100))
    return re.sub(r"\x1b\[[0-9;]*m", "", out.getvalue())


def test_a_message_instruction_is_the_fix_line():
    """Title in words, the command from the message, why, where and the releases."""
    lines = _screen(BNB_MESSAGE, [BNB]).splitlines()
    assert lines[1].startswith("errkb: Calling `cuda()` is not supported for `4-bit` quantized")
    assert "Fix: pip install 'bitsandbytes>=0.43.2'" == lines[2]
    assert lines[3].startswith("Why: Raised by PreTrainedModel.cuda")
    where = next(line for line in lines if line.startswith("Where: "))
    assert (
        "Where: raised in transformers 4.46.3 to 4.57.3 at transformers/modeling_utils.py:3065-4275"
        == where
    )


def test_the_installed_release_is_where_and_its_link():
    """With the installed release read, its file and line, its tag's link, and the releases."""
    text = _screen(BNB_MESSAGE, [BNB], transformers="4.50.0")
    assert (
        "Where: transformers/modeling_utils.py:3065 in transformers 4.50.0 (installed)\n"
        "  https://github.com/huggingface/transformers/blob/v4.50.0/src/transformers/"
        "modeling_utils.py#L3065\n"
        "Releases: transformers 4.46.3 to 4.57.3\n"
    ) in text
    assert "raised by" not in text  # said once, by the Releases line


def test_a_release_that_does_not_raise_it_says_so():
    """The installed 5.0.0 is past the last release that raises it: the range, and that."""
    text = _screen(BNB_MESSAGE, [BNB], transformers="5.0.0")
    assert "Where: raised in transformers 4.46.3 to 4.57.3 at" in text
    assert "Releases: transformers 5.0.0 (installed) is not one of them" in text


def test_the_site_of_the_stated_release_not_the_newest():
    """The item 7 bug: a vLLM 0.9.2 log reads _custom_ops.py, not rocm.py."""
    text = _screen(f"vLLM API server version 0.9.2\n{MESSAGE}", [VLLM])
    assert "Where: vllm/_custom_ops.py:20 in vllm 0.9.2 (as the text states)" in text
    assert "rocm.py" not in text.split("Where: ")[1].split("\n")[1]


def test_nothing_derivable_has_no_fix_line_but_says_the_check_and_where():
    """No instruction, no pin, no config in the guard: the check and its place, no Fix."""
    text = _screen("ValueError: quant_state is required", [QUANT])
    assert "Fix:" not in text
    assert "errkb: quant_state is required [error]" in text
    assert "Why: Raised by matmul_4bit when quant_state is None." in text
    assert (
        "Where: raised in bitsandbytes 0.50.2 (the newest checked) at "
        "bitsandbytes/autograd/_functions.py:415"
    ) in text


@pytest.mark.parametrize("color", [False, True])
def test_the_first_screen_fits_at_100_columns(color):
    """Plain and rich: the title, the Fix within the first lines, no line past 100 columns."""
    text = _screen(BNB_MESSAGE, [BNB], color=color, transformers="4.50.0")
    lines = text.splitlines()
    assert all(len(line) <= 100 for line in lines)
    assert any("Fix: pip install 'bitsandbytes>=0.43.2'" in line for line in lines[:4])
    assert len(lines) <= 14


def test_a_hand_written_record_keeps_its_first_screen():
    """Only mined records get a derived title, fix and site."""
    record = record_dict(id="acme-boom", title="Acme boomed", messagePattern="boom")
    diagnosis = errkb.explain("boom", registry=registry_from_dicts([record]))
    top = diagnosis.top
    assert ("Acme boomed", None, None, None) == (top.heading, top.fix, top.site, top.title)


def test_the_json_has_the_heading_fix_and_site():
    """The JSON adds ``heading``, ``fix`` and ``site`` to a match, and ``fix`` at the top."""
    diagnosis = errkb.explain(
        BNB_MESSAGE,
        registry=registry_from_dicts([BNB]),
        options=Options(
            measurements=FakeMeasurements(readings={"installed": {"transformers": "4.50.0"}})
        ),
    )
    data = json.loads(render_json(diagnosis))
    match = data["matches"][0]
    fix = {
        "text": "pip install 'bitsandbytes>=0.43.2'",
        "source": "message",
        "command": "pip install 'bitsandbytes>=0.43.2'",
        "settings": {},
    }
    assert fix == match["fix"] == data["fix"]
    assert match["heading"].startswith("Calling `cuda()` is not supported")
    assert {
        "distribution": "transformers",
        "release": "4.50.0",
        "basis": "installed",
        "until": None,
        "raises": True,
        "file": "transformers/modeling_utils.py",
        "line": 3065,
        "url": "https://github.com/huggingface/transformers/blob/v4.50.0/src/transformers/"
        "modeling_utils.py#L3065",
        "releases": {"first": "4.46.3", "last": "4.57.3", "checked": "5.24.0"},
        "spread": [],
    } == match["site"]
