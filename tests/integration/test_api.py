"""The facade seen from outside: a fresh interpreter's imports, and the CLI's JSON."""

from __future__ import annotations

import json

from helpers import NO_BLOCKS_MESSAGE, SEED_MESSAGE, run_cli, run_python

import errkb


def test_import_errkb_and_install_load_nothing_heavy():
    """A child that imports errkb and installs the hook has no rich, torch, transformers, records."""
    code = "import sys, json; import errkb; errkb.install(); print(json.dumps(sorted(sys.modules)))"
    proc = run_python(code)
    assert 0 == proc.returncode, proc.stderr
    loaded = set(json.loads(proc.stdout))
    heavy = {
        "rich",
        "torch",
        "transformers",
        "regex",
        "attrs",
        "errkb.records",
        "errkb.registry",
        "errkb.match",
    }
    assert set() == heavy & loaded


def test_explain_api_matches_the_cli_json():
    """errkb.explain(text).to_dict() is the object `errkb explain --json` prints."""
    d = errkb.explain(f"ValueError: {NO_BLOCKS_MESSAGE}")
    cli = json.loads(
        run_cli("explain", "--json", "--no-probes", f"ValueError: {NO_BLOCKS_MESSAGE}").stdout
    )
    ours = json.loads(json.dumps(d.to_dict(), default=str))
    assert cli["matches"][0]["id"] == ours["matches"][0]["id"]
    assert cli["schema"] == ours["schema"]


def test_a_first_diagnosis_runs_its_compiled_patterns_without_regex_s_python_half():
    """The seed's diagnosis under the hook loads only regex's C engine: its patterns come compiled.

    regex's parser (``regex._regex_core``) costs ten milliseconds to import; the diagnosis is
    printed all the same, from patterns the shipped file holds.
    """
    code = (
        "import atexit, sys, errkb; errkb.install()\n"
        "atexit.register(lambda: print('regex' in sys.modules, 'regex._regex' in sys.modules))\n"
        f"raise ValueError({SEED_MESSAGE!r})\n"
    )
    proc = run_python(code)
    assert 1 == proc.returncode
    assert b"vllm-kv-cache-max-seq-len" in proc.stderr, proc.stderr.decode()
    assert b"False False" == proc.stdout.strip()


def test_a_scan_runs_its_compiled_patterns_without_regex_s_python_half():
    """errkb scan's reading of a log (needles, matches, log prefixes) compiles no pattern.

    Its records' patterns and errkb's own come from the shipped files; what the report's Fix
    lines need is another matter (a diagnosis each), so the scan is asked for its groups alone.
    """
    code = f"""if True:
        import io, sys
        from errkb.scan import scan_stream
        log = "ERROR 11-30 06:00:01 [core.py:41] ValueError: " + {NO_BLOCKS_MESSAGE!r} + "\\n"
        log += "(EngineCore_0 pid=1) ERROR 11-30 06:00:02 [core.py:9] " + {SEED_MESSAGE!r} + "\\n"
        result = scan_stream(io.BytesIO(log.encode() * 3))
        print(sorted(g.record.id for g in result.groups), "regex" in sys.modules)
    """
    proc = run_python(code)
    assert 0 == proc.returncode, proc.stderr.decode()
    expected = "['vllm-kv-cache-max-seq-len', 'vllm-no-cache-blocks'] False"
    assert expected == proc.stdout.decode().strip()


def test_regex_imported_after_the_engine_alone_is_regex_as_usual():
    """A program that imports regex after errkb loaded its engine alone sees regex unchanged.

    The engine's patterns are regex's patterns (one type), regex compiles and pickles as ever,
    and ``regex._regex`` is there as an attribute and a module.
    """
    code = f"""if True:
        import pickle, sys
        import errkb
        from errkb._lazy_regex import engine
        from errkb._patterns import compile_pattern
        [found, *_] = errkb.lookup({NO_BLOCKS_MESSAGE!r})
        assert "regex" not in sys.modules and "regex._regex" not in sys.modules
        loaded = compile_pattern(found.record.message_pattern)
        assert loaded.search({NO_BLOCKS_MESSAGE!r}) is not None
        import regex
        import regex._regex
        assert regex._regex is sys.modules["regex._regex"]
        assert regex._regex.compile is engine().compile
        assert isinstance(loaded, regex.Pattern), type(loaded)
        again = pickle.loads(pickle.dumps(regex.compile(r"(?P<n>\\d+) blocks")))
        assert again.search("12 blocks")["n"] == "12"
        assert regex.sub(r"\\d", "#", "a1b2") == "a#b#"
        print("ok")
    """
    proc = run_python(code)
    assert 0 == proc.returncode, proc.stderr.decode()
    assert b"ok" == proc.stdout.strip()


def test_the_engine_is_regex_s_own_once_regex_is_imported():
    """With regex imported first, the engine is regex's ``_regex`` module itself."""
    code = (
        "import regex, regex._regex\n"
        "from errkb._lazy_regex import engine, regex_errors\n"
        "print(engine() is regex._regex, regex_errors(OSError) == (OSError, regex.error))"
    )
    proc = run_python(code)
    assert 0 == proc.returncode, proc.stderr.decode()
    assert b"True True" == proc.stdout.strip()
