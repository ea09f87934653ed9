"""errkb.advisors._callsite: finding the engine call in the frames, and rewriting it.

Each rewrite is checked the way a user would use it: the rewritten call is put back into the
file, the file still parses, nothing outside the call changed, and running the call again
passes the new settings to the engine.
"""

from __future__ import annotations

import ast
import textwrap

from errkb.advisors._callsite import find_engine_call, rewrite_call
from errkb.findings import FrameInfo


def _site(tmp_path, source: str, line: int, library: bool = False):
    path = tmp_path / "serve.py"
    path.write_text(textwrap.dedent(source))
    frame = FrameInfo(file=str(path), line=line, function="<module>", library=library)
    return path, find_engine_call([frame])


def _apply_and_run(path, site, after: str) -> dict[str, object]:
    """Splice ``after`` over the call's lines, check the rest is untouched, run it."""
    lines = path.read_text().split("\n")
    new = "\n".join([*lines[: site.line - 1], after, *lines[site.end_line :]])
    ast.parse(new)
    assert lines[: site.line - 1] == new.split("\n")[: site.line - 1]
    seen: dict[str, object] = {}

    def LLM(*args: object, **kwargs: object) -> None:
        seen.update(kwargs)

    exec(compile(new, str(path), "exec"), {"LLM": LLM})  # the test's own stand-in, not a record
    return seen


def test_find_engine_call_reads_the_call_under_the_frame(tmp_path):
    """The frame's line inside LLM(...) gives the whole call and its keywords."""
    _, site = _site(tmp_path, 'llm = LLM(\n    model="m",\n    max_model_len=32768,\n)\n', 3)
    assert site is not None
    assert (1, 4) == (site.line, site.end_line)
    assert ("model", "max_model_len") == site.keywords


def test_find_engine_call_skips_frames_without_one(tmp_path):
    """A frame whose line holds no engine call gives nothing."""
    _, site = _site(tmp_path, "x = 1\n", 1)
    assert site is None


def test_rewrite_replaces_an_existing_keyword_and_the_call_runs(tmp_path):
    """An existing max_model_len gets the new value; comments and other arguments stay."""
    source = 'llm = LLM(\n    model="m",  # the model\n    max_model_len=32768,\n)\n'
    path, site = _site(tmp_path, source, 2)
    after = rewrite_call(site, {"max_model_len": 12288})
    assert 'model="m",  # the model' in after
    assert {"model": "m", "max_model_len": 12288} == _apply_and_run(path, site, after)


def test_rewrite_adds_a_missing_keyword_to_a_one_line_call(tmp_path):
    """A keyword the call lacks is added before the closing parenthesis."""
    path, site = _site(tmp_path, 'llm = LLM(model="m")\n', 1)
    after = rewrite_call(site, {"gpu_memory_utilization": 0.95})
    assert 'llm = LLM(model="m", gpu_memory_utilization=0.95)' == after
    assert {"model": "m", "gpu_memory_utilization": 0.95} == _apply_and_run(path, site, after)


def test_rewrite_adds_keywords_on_their_own_lines_in_a_multi_line_call(tmp_path):
    """One argument a line: the new keyword goes on a line of its own, indented alike."""
    source = 'llm = LLM(\n    model="m",\n    dtype="bfloat16",\n)\n'
    path, site = _site(tmp_path, source, 2)
    after = rewrite_call(site, {"max_model_len": 12288})
    assert '    dtype="bfloat16",\n    max_model_len=12288,\n)' in after
    seen = _apply_and_run(path, site, after)
    assert {"model": "m", "dtype": "bfloat16", "max_model_len": 12288} == seen


def test_rewrite_keeps_the_indentation_of_a_call_inside_a_function(tmp_path):
    """An indented call comes back indented, and the function still runs."""
    source = 'def main():\n    return LLM(model="m")\nmain()\n'
    path, site = _site(tmp_path, source, 2)
    after = rewrite_call(site, {"max_model_len": 4096})
    assert '    return LLM(model="m", max_model_len=4096)' == after
    assert {"model": "m", "max_model_len": 4096} == _apply_and_run(path, site, after)
