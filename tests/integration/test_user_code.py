"""No record of a library claims an error of the user's own code (issue 21, item 6).

A mined record built from a message Python words itself (``X() got an unexpected keyword
argument``, ``'X' object has no attribute``, ``cannot import name``, ...) matches only when the
message names what the record names, or the traceback passes through the library. The set in
``tests/data/user-code/`` is a user's classes, functions and modules in every such wording; its
wordings are checked against this Python's own messages here, and the shipped records of the
libraries must claim none of them, while the library's own errors are still found. The
interpreter's own records (records/python, tagged ``interpreter``) are meant for exactly these:
they explain Python's error and name the frame that raised it, and they answer every message
of the set that they cover.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import pytest
from helpers import DATA

from errkb.match import INTERPRETER_TAG
from errkb.registry import builtin_records_dir, default_registry

if TYPE_CHECKING:
    from errkb.match import Match

HERE = DATA / "user-code"
MESSAGES = HERE / "messages.jsonl"
PACKS = sorted((builtin_records_dir() / "mined").glob("*.jsonl"))
pytestmark = pytest.mark.skipif(not PACKS, reason="no mined packs in this tree")


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location("user_code_generate", HERE / "generate.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GENERATE = _generator()


def _message(call: Any) -> str:
    """The message this Python gives the exception ``call`` raises."""
    with pytest.raises(Exception) as info:
        call()
    return str(info.value)


def _ids(matches: list[Match]) -> set[str]:
    """The records matched, and those folded into them as "also raised at" lines."""
    folded = {line.split(" ", 1)[0] for m in matches for line in m.also}
    return {m.record.id for m in matches} | folded


class Net:
    """A user's class, for the real messages."""

    def __init__(self) -> None:
        """Defined, so that Python names it: ``Net.__init__() got an unexpected keyword``."""

    def forward(self, x: object) -> object:
        return x

    def forward2(self, x: object, y: object) -> object:
        return x, y

    def step(self, *, use_cache: bool) -> bool:
        return use_cache


def forward(x: object) -> object:
    """A function of a user's module: Python 3.10+ prints it bare, as 3.9 prints a method."""
    return x


def _hint() -> str:
    """The hint line as a traceback prints it (3.10+): not part of ``str(exc)``, and added by
    the interpreter's own printing before 3.12, so read from a child's real stderr."""
    code = "class Net:\n    labels = None\nNet().lables\n"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=60
    )
    return done.stderr.strip().splitlines()[-1].partition(": ")[2]


def test_the_committed_set_is_what_the_script_writes():
    """messages.jsonl is generate.py's output, at least 300 messages, each once."""
    committed = [json.loads(line) for line in MESSAGES.read_text().splitlines()]
    assert GENERATE.messages() == committed
    assert len(committed) >= 300
    assert set(GENERATE.SHAPES) == {m["shape"] for m in committed}


@pytest.mark.parametrize(
    ("shape", "call", "parts"),
    [
        ("call-kw", lambda: Net(device=1), {"cls": "Net", "func": "__init__", "name": "device"}),
        ("call-bare-kw", lambda: forward(1, device=1), {"func": "forward", "name": "device"}),
        ("call-missing", lambda: Net().forward(), {"cls": "Net", "func": "forward", "name": "x"}),
        ("call-bare-missing", forward, {"func": "forward", "name": "x"}),
        (
            "call-missing-two",
            lambda: Net().forward2(),
            {"cls": "Net", "func": "forward2", "name": "x", "other": "y"},
        ),
        (
            "call-missing-kwonly",
            lambda: Net().step(),
            {"cls": "Net", "func": "step", "name": "use_cache"},
        ),
        ("object-attr", lambda: Net().config, {"cls": "Net", "name": "config"}),
        ("type-attr", lambda: Net.config, {"cls": "Net", "name": "config"}),
        (
            "no-module",
            lambda: importlib.import_module("usercode_no_such_module"),
            {"module": "usercode_no_such_module"},
        ),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_each_wording_is_this_pythons_own(shape, call, parts):
    """Raised for real, the exception's message is the generated one for its shape, and its
    class is the class the set gives it."""
    with pytest.raises(Exception) as info:
        call()
    assert GENERATE.message(shape, **parts) == str(info.value)
    assert GENERATE.SHAPES[shape][0] == type(info.value).__name__


def test_module_wordings_are_this_pythons_own(tmp_path, monkeypatch):
    """A module's missing attribute and a name it cannot import read as the set words them."""
    (tmp_path / "usercode_mymodule.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "usercode_mymodule", raising=False)
    module = importlib.import_module("usercode_mymodule")
    attr = _message(lambda: module.config)
    assert GENERATE.message("module-attr", module="usercode_mymodule", name="config") == attr
    with pytest.raises(ImportError) as info:
        exec("from usercode_mymodule import MyModel", {})
    expected = GENERATE.message(
        "import-name", cls="MyModel", module="usercode_mymodule", path=module.__file__
    )
    assert expected == str(info.value)
    sys.modules.pop("usercode_mymodule", None)


@pytest.mark.skipif(sys.version_info < (3, 10), reason="the hint is printed from 3.10 on")
def test_the_hint_wording_is_this_pythons_own():
    """The "Did you mean" hint of a printed traceback reads as the set words it."""
    assert GENERATE.message("object-attr-hint", cls="Net", name="lables", other="labels") == _hint()


def _libraries(found: list[Match]) -> list[Match]:
    """The matches of library records: all but the interpreter's own."""
    return [m for m in found if INTERPRETER_TAG not in m.record.tags]


def test_no_library_record_claims_a_users_own_code():
    """Every message of the set, with its class and no traceback, matches no shipped record of
    a library; those it matches at all, it matches with the interpreter's record."""
    matcher = default_registry().matcher
    claimed, explained = [], 0
    for line in MESSAGES.read_text().splitlines():
        entry = json.loads(line)
        found = matcher.match(entry["message"], entry["errorClass"])
        if _libraries(found):
            claimed.append((entry["message"], [(m.record.library, m.record.id) for m in found]))
        explained += bool(found)
    assert [] == claimed
    assert explained, "the interpreter's records explain the set's messages"


def test_a_frame_in_another_library_vouches_for_none():
    """User code runs under torch's ``Module.__call__``: a torch frame lets no transformers or
    vLLM record claim the user's message."""
    matcher = default_registry().matcher
    frames = ["/home/me/train.py", "/venv/lib/python3.9/site-packages/torch/nn/modules/module.py"]
    sample = [json.loads(line) for line in MESSAGES.read_text().splitlines()[::4]]
    claimed = [
        (e["message"], [m.record.id for m in found])
        for e in sample
        if (found := _libraries(matcher.match(e["message"], e["errorClass"], files=frames)))
    ]
    assert [] == claimed


def test_errkb_lookup_claims_none_either():
    """The public lookup, which takes no traceback, gives no library's record for a sample of
    the set."""
    import errkb

    sample = [json.loads(line) for line in MESSAGES.read_text().splitlines()[::25]]
    claimed = [
        e["message"] for e in sample if _libraries(errkb.lookup(e["message"], e["errorClass"]))
    ]
    assert [] == claimed


@pytest.mark.parametrize(
    ("message", "error_class", "record"),
    [
        (
            "'DynamicCache' object has no attribute 'get_usable_length'",
            "AttributeError",
            "skew-transformers-747708d7e2f5",
        ),
        (
            "LlamaForCausalLM.forward() got an unexpected keyword argument 'num_logits_to_keep'",
            "TypeError",
            "skew-transformers-c6a2011458b7",
        ),
        (
            (
                "cannot import name 'TFBertForMaskedLM' from 'transformers' "
                "(/usr/local/lib/python3.7/site-packages/transformers/__init__.py)"
            ),
            "ImportError",
            "skew-transformers-386ad6e2e158",
        ),
    ],
)
def test_the_librarys_own_errors_are_still_found(message, error_class, record):
    """A message naming a class, method or name that a skew record covers still finds it."""
    assert record in _ids(default_registry().matcher.match(message, error_class))


def test_a_bare_method_is_found_with_a_frame_in_the_library():
    """Python 3.9's bare ``forward()`` names no class: a transformers frame vouches for it."""
    message = "forward() got an unexpected keyword argument 'num_logits_to_keep'"
    frame = "/usr/lib/python3.9/site-packages/transformers/models/llama/modeling_llama.py"
    matcher = default_registry().matcher
    assert "skew-transformers-c6a2011458b7" in _ids(
        matcher.match(message, "TypeError", files=[frame])
    )
    assert [] == _libraries(matcher.match(message, "TypeError", files=["/home/me/train.py"]))


def test_the_class_shown_is_the_users_class():
    """A member many classes lost is explained for the class in the message."""
    [match] = [
        m
        for m in default_registry().matcher.match(
            "'SlidingWindowCache' object has no attribute 'get_usable_length'", "AttributeError"
        )
        if m.record.id == "skew-transformers-747708d7e2f5"
    ]
    assert match.record.documentation is not None
    assert (
        "`get_usable_length` was removed from `SlidingWindowCache` in transformers 4.54.0"
        in match.record.documentation
    )
    assert "classes that inherit it" not in match.record.documentation
