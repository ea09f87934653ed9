"""The interpreter's own errors (records/python/): their wordings, their rank, whose code raised them.

Every message here is real: raised by this Python in the test itself, printed by the CPython
releases named beside it (pyenv's 2.7.18 and 3.6.15 to 3.13.0, each running the same snippet;
the stdlib's Python source is cited by file and line where it words the message), or copied from
the report corpus (tests/data/reports/corpus.jsonl, by entry id).
"""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import errkb
from errkb.advisors.python_raised import Owner, owner_of
from errkb.diagnosis import diagnose, explain
from errkb.findings import FrameInfo
from errkb.options import Options

CORPUS = Path(__file__).resolve().parents[1] / "data" / "reports" / "corpus.jsonl"
NO_PROBES = Options(probes=False)


def _corpus() -> dict[str, dict[str, Any]]:
    with CORPUS.open(encoding="utf-8") as f:
        return {e["id"]: e for e in map(json.loads, filter(str.strip, f))}


ENTRIES = _corpus()


def _top(message: str, cls: type[BaseException] | str | None = None) -> str | None:
    found = errkb.lookup(message, cls)
    return found[0].record.id if found else None


def _raised(code: str) -> BaseException:
    try:
        exec(compile(code, "<program>", "exec"), {})
    except BaseException as exc:
        return exc
    pytest.fail(f"{code!r} raised nothing")


# -- real errors of this Python ---------------------------------------------------------------

LIVE = [
    ("undefined_name_xyz", "python-name-not-defined"),
    (
        "class C:\n    def __init__(self, a): pass\nC(1, bogus=2)",
        "python-unexpected-keyword-argument",
    ),
    ("len([], x=1)", "python-unexpected-keyword-argument"),
    ("print('x', bogus=1)", "python-unexpected-keyword-argument"),
    ("def g(x, y): pass\ng(1)", "python-wrong-number-of-arguments"),
    ("def f(x): pass\nf(1, 2)", "python-wrong-number-of-arguments"),
    ("len()", "python-wrong-number-of-arguments"),
    ("divmod(1)", "python-wrong-number-of-arguments"),
    ("a, b = [1]", "python-unpack-count-mismatch"),
    ("a, b = [1, 2, 3]", "python-unpack-count-mismatch"),
    ("a, b, *c = [1]", "python-unpack-count-mismatch"),
    ("None.shape", "python-nonetype-has-no-attribute"),
    ("class C: pass\nC().bogus", "python-object-has-no-attribute"),
    ("class C: pass\nC.bogus", "python-object-has-no-attribute"),
    ("b'\\xf8abc'.decode('utf-8')", "python-unicode-decode-error"),
    ("b'a\\xc3('.decode('utf-8')", "python-unicode-decode-error"),
    ("b'\\xe2'.decode('ascii')", "python-unicode-decode-error"),
    ("[][1]", "python-index-out-of-range"),
    ("()[1]", "python-index-out-of-range"),
    ("[].pop()", "python-index-out-of-range"),
    ("open('/nonexistent/errkb/x.bin')", "python-file-not-found"),
    ("import subprocess\nsubprocess.check_call(['false'])", "python-subprocess-failed"),
    (
        "import pickle\npickle.loads(b'version https://git-lfs')",
        "python-unpickling-invalid-load-key",
    ),
    ("import pickle\npickle.loads(b'<!DOCTYPE html>')", "python-unpickling-invalid-load-key"),
    ("def f():\n    if False:\n        v = 1\n    return v\nf()", "python-unbound-local-variable"),
    ("compile('a b', '<s>', 'exec')", "python-syntax-error"),
    ("compile('x = 1a', '<s>', 'exec')", "python-syntax-error"),
    ("compile('if 1:\\npass', '<s>', 'exec')", "python-syntax-error"),
    ("import errkb_no_such_module_xyz", "python-import-error"),
    ("max([])", "python-max-min-empty-sequence"),
    ("min(x for x in ())", "python-max-min-empty-sequence"),
    ("'%s' % (1, 2)", "python-not-all-arguments-converted"),
    ("'5' % 2", "python-not-all-arguments-converted"),
    ("open('/tmp/' + 'x' * 300)", "python-file-name-too-long"),
]


@pytest.mark.parametrize(("code", "expected"), LIVE, ids=[c for c, _ in LIVE])
def test_a_real_error_of_this_python_finds_its_record(code: str, expected: str) -> None:
    """The message and class this interpreter raises are the record's, first."""
    exc = _raised(code)
    assert expected == _top(str(exc), type(exc))


def test_a_port_already_in_use_finds_its_record() -> None:
    """A second bind to a listening port raises errno 98 (EADDRINUSE) on Linux."""
    import socket

    with socket.socket() as first, socket.socket() as second:
        first.bind(("127.0.0.1", 0))
        first.listen(1)
        with pytest.raises(OSError, match="Address already in use") as caught:
            second.bind(first.getsockname())
    assert "python-address-already-in-use" == _top(str(caught.value), type(caught.value))


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX file modes")
def test_a_permission_denied_finds_its_record(tmp_path: Path) -> None:
    """A file without read permission, opened by a user other than root."""
    import os

    if os.geteuid() == 0:
        pytest.skip("root reads any file")
    locked = tmp_path / "locked"
    locked.write_text("x")
    locked.chmod(0)
    with pytest.raises(PermissionError) as caught:
        locked.read_text()
    assert "python-permission-denied" == _top(str(caught.value), type(caught.value))


def test_a_directory_not_empty_finds_its_record(tmp_path: Path) -> None:
    """rmdir of a folder that still holds a file raises errno 39 (ENOTEMPTY) on Linux."""
    (tmp_path / "kept").write_text("x")
    with pytest.raises(OSError, match="Directory not empty") as caught:
        tmp_path.rmdir()
    assert "python-directory-not-empty" == _top(str(caught.value), type(caught.value))


def test_an_invalid_argument_finds_its_record(tmp_path: Path) -> None:
    """A seek before the start of a regular file raises errno 22 (EINVAL), without a path."""
    import os

    file = tmp_path / "f"
    file.write_text("x")
    fd = os.open(file, os.O_RDONLY)
    try:
        with pytest.raises(OSError, match=r"\[Errno 22\] Invalid argument") as caught:
            os.lseek(fd, -1, os.SEEK_SET)
    finally:
        os.close(fd)
    assert "python-invalid-argument" == _top(str(caught.value), type(caught.value))


# -- wordings of other releases -----------------------------------------------------------------

#: Printed by the releases named (the same snippet run by each), where this Python words it
#: otherwise. Python-level wordings cite the stdlib source line at that release.
OTHER_RELEASES = [
    # Python 2.7.18, a global read inside a function.
    ("NameError", "global name 'undefined_name_xyz' is not defined", "python-name-not-defined"),
    # 3.12.1 (Lib/traceback.py:772, no question mark) and 3.13.0 (Lib/traceback.py:1099).
    ("NameError", "name 'sys' is not defined. Did you forget to import 'sys'", "python-name-not-defined"),
    # 3.6.15 to 3.9.18 print a method bare; 3.10.13 and later qualify it (Cls.__init__()).
    ("TypeError", "__init__() got an unexpected keyword argument 'bogus'", "python-unexpected-keyword-argument"),
    # 3.13.0 suggests a close parameter and words C functions' errors like Python's.
    ("TypeError", "h() got an unexpected keyword argument 'yy'. Did you mean 'y'?", "python-unexpected-keyword-argument"),
    ("TypeError", "sorted() got an unexpected keyword argument 'bogus'", "python-unexpected-keyword-argument"),
    # 3.6.15: a C function's error named no function.
    ("TypeError", "'bogus' is an invalid keyword argument for this function", "python-unexpected-keyword-argument"),
    # 3.6.15 to 3.8.18 name a method bare (`append()`), 3.9.18 and later `list.append()`.
    ("TypeError", "append() takes no keyword arguments", "python-unexpected-keyword-argument"),
    # Python 2.7.18, too few and too many alike.
    ("TypeError", "g() takes exactly 2 arguments (1 given)", "python-wrong-number-of-arguments"),
    ("TypeError", "__init__() takes exactly 2 arguments (1 given)", "python-wrong-number-of-arguments"),
    # 3.8.18: int.__round__(1, 2, 3), a C function that names none.
    ("TypeError", "function takes at most 1 argument (3 given)", "python-wrong-number-of-arguments"),
    ("TypeError", "clear() takes no arguments (1 given)", "python-wrong-number-of-arguments"),
    # Python 2.7.18.
    ("ValueError", "need more than 1 value to unpack", "python-unpack-count-mismatch"),
    ("ValueError", "too many values to unpack", "python-unpack-count-mismatch"),
    ("AttributeError", "'module' object has no attribute 'bogus'", "python-object-has-no-attribute"),
    ("UnicodeDecodeError", "'utf8' codec can't decode byte 0xf8 in position 0: invalid start byte", "python-unicode-decode-error"),
    ("IOError", "[Errno 2] No such file or directory: '/nonexistent/x.bin'", "python-file-not-found"),
    # Python 2.7.18's Lib/subprocess.py:56 ends without a period; 3.8.18's :115 for a signal.
    ("CalledProcessError", "Command '['false']' returned non-zero exit status 1", "python-subprocess-failed"),
    ("subprocess.CalledProcessError", "Command '['sh', '-c', 'kill -9 $$']' died with <Signals.SIGKILL: 9>.", "python-subprocess-failed"),
    ("UnpicklingError", "invalid load key, 'v'.", "python-unpickling-invalid-load-key"),
    # 3.6.15 to 3.10.13; 3.11 rewords it.
    ("UnboundLocalError", "local variable 'loc' referenced before assignment", "python-unbound-local-variable"),
    # 3.6.15 to 3.9.18's parser; 3.10 rewords each.
    ("SyntaxError", "unexpected EOF while parsing", "python-syntax-error"),
    ("SyntaxError", "EOL while scanning string literal", "python-syntax-error"),
    ("SyntaxError", "invalid character in identifier", "python-syntax-error"),
    # 3.12.1 and later.
    ("SyntaxError", "parameter without a default follows parameter with a default", "python-syntax-error"),
    ("IndentationError", "expected an indented block after 'if' statement on line 1", "python-syntax-error"),
    # Python 2.7.18 did not quote the module.
    ("ImportError", "No module named _C", "python-import-error"),
    # 3.6.15 to 3.11.7 (and 2.7.18); 3.12.1 and 3.13.0 say "iterable argument is empty".
    ("ValueError", "max() arg is an empty sequence", "python-max-min-empty-sequence"),
    ("ValueError", "min() iterable argument is empty", "python-max-min-empty-sequence"),
    # A shared library without PyInit_<name>, imported by 3.6.15 to 3.13.0, and by 2.7.18.
    ("ImportError", "dynamic module does not define module export function (PyInit_libnumbuf)", "python-extension-without-init-function"),
    ("ImportError", "dynamic module does not define init function (initlibnumbuf)", "python-extension-without-init-function"),
]  # fmt: skip


@pytest.mark.parametrize(("cls", "message", "expected"), OTHER_RELEASES)
def test_a_wording_of_another_release_finds_the_same_record(
    cls: str, message: str, expected: str
) -> None:
    """Each record covers its error in every wording the releases printed."""
    assert expected == _top(message, cls)


def test_this_python_prints_the_wordings_the_records_claim_for_it() -> None:
    """The 3.10+ forms (a qualified method, a parse error's new words) are this Python's own."""
    kwarg = _raised("class Cls:\n    def __init__(self): pass\nCls(bogus=1)")
    assert "Cls.__init__() got an unexpected keyword argument 'bogus'" == str(kwarg)
    eof = _raised("compile('f(', '<s>', 'exec')")
    assert "'(' was never closed" == eof.args[0]


# -- reports from the corpus --------------------------------------------------------------------

CORPUS_LINES = [
    ("torch-48", "python-name-not-defined"),
    ("accelerate-3", "python-unexpected-keyword-argument"),
    ("tokenizers-3", "python-unexpected-keyword-argument"),
    ("sentencepiece-12", "python-unexpected-keyword-argument"),
    ("torch-33", "python-wrong-number-of-arguments"),
    ("triton-10", "python-wrong-number-of-arguments"),
    ("vllm-28", "python-unpack-count-mismatch"),
    ("xformers-11", "python-unpack-count-mismatch"),
    ("transformers-15", "python-nonetype-has-no-attribute"),
    ("vllm-4", "python-object-has-no-attribute"),
    ("torch-6", "python-object-has-no-attribute"),
    ("vllm-36", "python-unicode-decode-error"),
    ("ChatTTS-28", "python-index-out-of-range"),
    ("vllm-11", "python-address-already-in-use"),
    ("ChatTTS-30", "python-file-not-found"),
    ("ray-13", "python-permission-denied"),
    ("torch-36", "python-subprocess-failed"),
    ("torchaudio-17", "python-syntax-error"),
    ("ChatTTS-25", "python-unpickling-invalid-load-key"),
    ("accelerate-13", "python-import-error"),
    ("vllm-6", "python-max-min-empty-sequence"),
    ("torchaudio-20", "python-not-all-arguments-converted"),
    ("ray-10", "python-extension-without-init-function"),
    ("deepspeed-14", "python-directory-not-empty"),
    ("bitsandbytes-13", "python-file-name-too-long"),
    ("sentencepiece-17", "python-invalid-argument"),
]


@pytest.mark.parametrize(("entry", "expected"), CORPUS_LINES, ids=[e for e, _ in CORPUS_LINES])
def test_a_reported_error_line_finds_its_record(entry: str, expected: str) -> None:
    """The error line of a real report, read as ``errkb explain`` reads it."""
    found = explain(ENTRIES[entry]["errorLine"], options=NO_PROBES)
    assert found is not None
    assert expected == found.top.record.id


# -- below every library's record ---------------------------------------------------------------

#: Error lines of the corpus whose message a library's record explains, hand-written, mined
#: (skew) or a python-import fallback: that record stays first, the interpreter's comes after.
LIBRARY_FIRST = [
    ("vllm-5", "vllm-num-scheduler-steps-removed", "python-unexpected-keyword-argument"),
    ("vllm-25", "skew-vllm-43926608a051", "python-unexpected-keyword-argument"),
    ("accelerate-9", "skew-accelerate-e0106c9e65df", "python-unexpected-keyword-argument"),
    ("vllm-34", "vllm-custom-ops-not-imported", "python-name-not-defined"),
    ("ChatTTS-3", "chattts-chat-api-missing-old-release", "python-object-has-no-attribute"),
    ("ChatTTS-19", "chattts-chat-unexpected-keyword", "python-unexpected-keyword-argument"),
    ("ChatTTS-24", "chattts-normalizer-unbound-local", "python-unbound-local-variable"),
    ("sentencepiece-8", "sentencepiece-processor-encode-added-0-1-91", "python-object-has-no-attribute"),
    ("transformers-12", "skew-transformers-e2b2b004d4fc", "python-import-error"),
    ("transformers-24", "transformers-python-import", "python-import-error"),
    ("vllm-18", "vllm-compiled-module-missing", "python-import-error"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("entry", "first", "generic"), LIBRARY_FIRST, ids=[e for e, _, _ in LIBRARY_FIRST]
)
def test_a_library_record_ranks_above_the_interpreter_record(
    entry: str, first: str, generic: str
) -> None:
    """The interpreter's record matches too, and ranks below the library's."""
    found = explain(ENTRIES[entry]["errorLine"], options=NO_PROBES)
    assert found is not None
    ids = [f.record.id for f in found.findings]
    assert first == ids[0]
    assert generic in ids
    assert ids.index(generic) > ids.index(first)


def test_an_inner_interpreter_error_comes_after_its_library_wrapper() -> None:
    """transformers-5: the wrapper's record explains more than `name 'x' is not defined` alone."""
    found = explain(ENTRIES["transformers-5"]["text"], options=NO_PROBES)
    assert found is not None
    assert "transformers" == found.top.record.library
    assert "python-name-not-defined" in [f.record.id for f in found.findings]


def test_a_missing_file_of_an_installed_package_is_not_the_interpreter_record() -> None:
    """xformers-18: a package's own file missing is a broken install of it, not a user's path."""
    line = ENTRIES["xformers-18"]["errorLine"]
    assert "python-file-not-found" not in [
        m.record.id for m in errkb.lookup(line.split(": ", 1)[1])
    ]


# -- whose code raised it -----------------------------------------------------------------------


def _facts(diagnosis: Any) -> dict[str, Any]:
    return {f.name: f for f in diagnosis.top.facts}


def test_a_live_error_raised_in_the_users_code_says_so() -> None:
    """The innermost frame is this test file: the user's code."""
    try:
        undefined_name_for_errkb  # type: ignore[name-defined]
    except NameError as exc:
        found = diagnose(exc, options=NO_PROBES)
    assert found is not None
    assert "python-name-not-defined" == found.top.record.id
    raised = _facts(found)["raised in"]
    assert "traceback" == raised.source
    assert raised.value.startswith(f"{__file__}:")
    assert raised.value.endswith("(your code)")


def test_a_live_error_raised_in_the_standard_library_names_the_users_call() -> None:
    """subprocess raises it in its own file; the user's call is named beside it."""
    try:
        subprocess.check_call(["false"])
    except subprocess.CalledProcessError as exc:
        found = diagnose(exc, options=NO_PROBES)
    assert found is not None
    facts = _facts(found)
    assert "subprocess.py:" in facts["raised in"].value
    assert facts["raised in"].value.endswith("(Python's standard library)")
    assert facts["your call"].value.startswith(f"{__file__}:")


def test_a_pasted_error_raised_inside_a_package_names_it_and_the_users_call() -> None:
    """vllm-26: vLLM's LLM() passed enforce_eager to an EngineArgs that lacks it."""
    found = explain(ENTRIES["vllm-26"]["text"], options=NO_PROBES)
    assert found is not None
    assert "python-unexpected-keyword-argument" == found.top.record.id
    facts = _facts(found)
    assert (
        "/usr/.venv/lib64/python3.8/site-packages/vllm/entrypoints/llm.py:78, in __init__"
        " (installed package vllm)"
    ) == facts["raised in"].value
    assert "benchmark_throughput.py:76, in run_vllm" == facts["your call"].value
    assert any("inside vllm" in s.text for s in found.top.solutions)


def test_a_pasted_error_raised_in_the_users_file_on_windows_says_your_code() -> None:
    """ChatTTS-10: the user's D:\\ChatTTS\\test_a.py."""
    found = explain(ENTRIES["ChatTTS-10"]["text"], options=NO_PROBES)
    assert found is not None
    assert "D:\\ChatTTS\\test_a.py:23, in <module> (your code)" == _facts(found)["raised in"].value


def test_a_message_alone_names_no_owner() -> None:
    """No frames, no claim about whose code it was."""
    found = explain("NameError: name 'x' is not defined", options=NO_PROBES)
    assert found is not None
    assert "raised in" not in _facts(found)


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/usr/lib/python3.10/site-packages/transformers/modeling_utils.py", Owner(kind="package", package="transformers")),
        ("C:\\Python310\\lib\\site-packages\\six.py", Owner(kind="package", package="six")),
        ("/usr/local/lib/python3.8/dist-packages/vllm/engine/llm_engine.py", Owner(kind="package", package="vllm")),
        ("/usr/lib/python3.10/subprocess.py", Owner(kind="stdlib")),
        ("C:\\Python310\\Lib\\json\\decoder.py", Owner(kind="stdlib")),
        ("<frozen importlib._bootstrap>", Owner(kind="stdlib")),
        ("<stdin>", Owner(kind="user")),
        ("/home/me/project/train.py", Owner(kind="user")),
        ("D:\\ChatTTS\\test_a.py", Owner(kind="user")),
    ],
)  # fmt: skip
def test_owner_of_a_frame_is_read_from_its_path(path: str, expected: Owner) -> None:
    """Installed packages, the standard library and the user's code, on POSIX and Windows."""
    assert expected == owner_of(FrameInfo(file=path, line=1, function="f", library=False))


def test_pickle_raises_invalid_load_key_for_a_git_lfs_pointer() -> None:
    """The record's first cause, for real: a Git LFS pointer's first byte is 'v'."""
    with pytest.raises(pickle.UnpicklingError, match="invalid load key, 'v'"):
        pickle.loads(b"version https://git-lfs.github.com/spec/v1\noid sha256:0\nsize 1\n")
