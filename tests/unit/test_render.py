"""Rendering: untrusted text never reaches the terminal raw, with colour on or off."""

from __future__ import annotations

import io
import re
import textwrap

import pytest
from helpers import SEED_MESSAGE

import errkb
from errkb import Options
from errkb.render import render
from errkb.testing import FakeMeasurements, record_dict, registry_from_dicts

ATTACKS = {
    "csi": "\x1b[2J\x1b[31m",
    "osc8": "\x1b]8;;https://evil.example\x07click\x1b]8;;\x07",
    "osc52": "\x1b]52;c;cm0gLXJmIC8=\x07",
    "bel": "\x07",
    "cr": "\roverwrite",
    "backspace": "abc\x08\x08\x08",
    "bidi": "\u202egnp.exe",
    "c1-csi": "\x9b31m",
}
RAW = [b"\x1b", b"\x07", b"\r", b"\x08", "\u202e".encode(), "\x9b".encode()]
EVIL = "".join(ATTACKS.values()) + " [bold red]markup[/bold red]"


_SGR = re.compile(rb"\x1b\[[0-9;]*m")


def _assert_nothing_raw(raw: bytes, color: bool) -> None:
    """No attack byte is in the output; with colour, only errkb's own SGR codes carry an ESC."""
    assert b"\x1b[2J\x1b[31m" not in raw  # the attack's own CSI pair, verbatim
    assert b"\\x1b[2J" in raw  # ... shown escaped instead
    if color:
        raw = _SGR.sub(b"", raw)
    for seq in RAW:
        assert seq not in raw, seq


def _registry():
    return registry_from_dicts(
        [
            record_dict(
                id="acme-evil",
                slug="evil",
                title="title " + EVIL,
                messagePattern=r"boom (?P<what>.+)",
                documentation="doc " + EVIL,
                commonSituations="situations " + EVIL,
                solutions=["solution " + EVIL],
                exampleFix="# before\nx = 1\n# after\nx = 2  " + EVIL,
                filePath="acme/" + EVIL,
                githubUrl="https://example.invalid/" + EVIL,
            )
        ]
    )


@pytest.mark.parametrize("color", [False, True])
def test_hostile_message_and_record_fields_are_escaped(color):
    """Escapes in the message (captures) and in every record field come out escaped."""
    diagnosis = errkb.explain("boom " + EVIL, registry=_registry())
    out = io.StringIO()
    render(diagnosis, Options(file=out, color=color, width=100))
    _assert_nothing_raw(out.getvalue().encode(), color)
    text = out.getvalue()
    assert "\\x1b]52;c;cm0gLXJmIC8=\\x07" in text  # shown escaped, readable
    assert "[bold red]markup[/bold red]" in text  # shown as text, not interpreted


@pytest.mark.parametrize("color", [False, True])
def test_hostile_frame_values_are_escaped(tmp_path, color):
    """Escapes in the user's source (shown in the rewritten call) and in engine values."""
    app = tmp_path / "app.py"
    app.write_text(
        textwrap.dedent(
            f"""
            class CacheConfig:
                block_size = 16
                gpu_memory_utilization = 0.5
                cache_dtype = {EVIL!r}
                num_gpu_blocks = 768


            class LLM:
                def __init__(self, model, max_model_len):
                    self.cache_config = CacheConfig()
                    raise ValueError({SEED_MESSAGE!r})


            def start():
                return LLM(model="{EVIL.encode("unicode_escape").decode()}", max_model_len=32768)
            """
        )
        .replace("\\x1b", "\x1b")
        .replace("\\x07", "\x07")
    )
    namespace: dict = {}
    exec(compile(app.read_text(), str(app), "exec"), namespace)
    try:
        namespace["start"]()
    except ValueError as exc:
        diagnosis = errkb.diagnose(exc, options=Options(measurements=FakeMeasurements(gpus=[])))
    out = io.StringIO()
    render(diagnosis, Options(file=out, color=color, width=120))
    raw = out.getvalue().encode()
    assert f"Example fix ({app}:".encode() in raw
    _assert_nothing_raw(raw, color)


def test_plain_render_into_a_string_console():
    """The plain form at width 100: heading, the fix, the record id, a rule of box characters."""
    diagnosis = errkb.explain(SEED_MESSAGE)
    out = io.StringIO()
    render(diagnosis, Options(file=out, color=False, width=100, probes=False))
    text = out.getvalue()
    assert text.startswith("\u2500" * 100 + "\nerrkb: ")
    assert (
        "matched a message (exception 1 of 1) | more: errkb show vllm-kv-cache-max-seq-len" in text
    )
    assert "\nFix: Lower max_model_len " in text


def test_ascii_fallback_has_no_box_characters():
    """ascii=True (a terminal without box characters): plain ASCII rules and borders."""
    diagnosis = errkb.explain(SEED_MESSAGE)
    for color in (False, True):
        out = io.StringIO()
        render(diagnosis, Options(file=out, color=color, ascii=True, width=100, probes=False))
        assert all(ord(ch) < 128 for ch in out.getvalue()), color


def _chain_diagnosis():
    registry = registry_from_dicts(
        [
            record_dict(id="gear-slipped", title="The gear slipped", messagePattern="gear slipped"),
            record_dict(id="belt-torn", title="The belt tore", messagePattern="belt torn"),
            record_dict(
                id="machine-wrapper",
                title="The machine stopped (see above)",
                messagePattern="machine stopped, see above",
                tags=["wrapper-error"],
            ),
        ]
    )
    try:
        try:
            try:
                raise ValueError("gear slipped")
            except ValueError as exc:
                raise RuntimeError("belt torn") from exc
        except RuntimeError as exc:
            raise RuntimeError("machine stopped, see above") from exc
    except RuntimeError as exc:
        return errkb.diagnose(exc, registry=registry, options=Options(probes=False))


def test_one_failure_is_one_block_with_what_it_led_to_and_its_wrapper_as_lines():
    """A chain is one failure: the root cause's block, then one line for each later exception."""
    from errkb.render import render_plain

    text = render_plain(_chain_diagnosis(), 100)
    assert ["errkb: The gear slipped [error]"] == [
        line for line in text.splitlines() if line.startswith("errkb: ") and "note:" not in line
    ]
    assert text.index("The gear slipped") < text.index("Which led to")
    assert "  - The belt tore  (belt-torn)" in text
    assert "Reported again by\n  - The machine stopped (see above)  (machine-wrapper)" in text
    assert "more: errkb show gear-slipped" in text
    assert "errkb show belt-torn" not in text  # no block (closing line) of its own
