"""Python's own import errors, raised for real in child processes, and errkb's advice for them.

Each child runs a real import in a real folder layout: a module that is not installed, a folder
left where a package was (a namespace package: "unknown location"), a source tree in the
working folder that shadows the installed transformers, the program's own torch.py or
ChatTTS.py importing itself, a ray.py where the ray package is expected, the metadata of a
distribution whose files are gone, a name the installed release lacks. The child diagnoses its
own exception with the hook's path (``errkb.diagnose``, probes on) and prints the top finding.

Every install command the advice computes is then run by the real pip (``--dry-run --report``)
against a local stand-in of the index holding the releases it names and others beside them, as
tests/integration/test_install_commands.py does: pip must pick what the command says.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import textwrap
from typing import TYPE_CHECKING

import pytest
from helpers import write_wheel
from packaging.requirements import Requirement
from packaging.version import Version

if TYPE_CHECKING:
    from pathlib import Path

#: The child: runs ``CODE`` in its working folder and prints errkb's top finding as JSON.
DRIVER = textwrap.dedent(
    """
    import json, sys
    import errkb
    try:
        exec(compile(sys.argv[1], "<program>", "exec"), {"__name__": "__main__"})
    except Exception as exc:
        diagnosis = errkb.diagnose(exc)
        top = diagnosis.findings[0] if diagnosis and diagnosis.findings else None
        print(json.dumps({
            "class": type(exc).__name__,
            "message": str(exc),
            "record": top and top.record.id,
            "solutions": top and [[s.text, dict(s.settings)] for s in top.solutions],
            "facts": top and {f.name: f.value for f in top.facts},
            "executable": sys.executable,
        }))
    """
)


def _run(code: str, cwd: Path, pythonpath: Path | str | None = None) -> dict:
    """Run ``code`` in a child Python in ``cwd`` (its folder first on sys.path, as a script's)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ERRKB_", "PYTHONPATH"))}
    env["ERRKB_CACHE_DIR"] = os.environ.get("ERRKB_CACHE_DIR", str(cwd / ".cache"))
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    driver = cwd / "_driver.py"
    driver.write_text(DRIVER, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(driver), code],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert 0 == done.returncode, done.stderr
    assert done.stdout.strip(), f"the child raised nothing:\n{done.stderr}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def _commands(found: dict) -> list[str]:
    return [s["command"] for _, s in found["solutions"] if "command" in s]


def _pip_picks(command: str, index: Path, tmp_path: Path) -> dict[str, str]:
    """What pip would install for ``command`` from the stand-in ``index``: {name: version}."""
    argv = shlex.split(command)
    assert argv[1:4] == ["-m", "pip", "install"], command
    report, target = tmp_path / "report.json", tmp_path / "target"
    done = subprocess.run(
        [*argv, "--dry-run", "--report", str(report), "--no-index", "--find-links", str(index),
         "--target", str(target), "--quiet", "--disable-pip-version-check"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert 0 == done.returncode, f"{command}\n{done.stderr}"
    data = json.loads(report.read_text(encoding="utf-8"))
    return {i["metadata"]["name"].lower(): i["metadata"]["version"] for i in data["install"]}


def _check_command(command: str, releases: dict[str, tuple[str, ...]], tmp_path: Path) -> None:
    """The command runs this interpreter's pip and installs what it names, of those releases."""
    index = tmp_path / "index"
    index.mkdir()
    for name, versions in releases.items():
        for version in versions:
            write_wheel(index, name, version, {})
    assert shlex.split(command)[0] == sys.executable
    picked = _pip_picks(command, index, tmp_path)
    for arg in shlex.split(command)[4:]:
        if arg.startswith("-"):
            continue
        wanted = Requirement(arg)
        version = picked.get(wanted.name.lower())
        assert version is not None, f"{command}: {picked}"
        assert wanted.specifier.contains(Version(version)), f"{command}: {version}"


def _absent(module: str) -> None:
    import importlib.util

    if importlib.util.find_spec(module) is not None:
        pytest.skip(f"{module} is installed here: the error needs it absent")


def test_a_module_not_installed_gets_this_interpreters_pip(tmp_path):
    """`import vllm` without vllm: not installed, and `<this python> -m pip install vllm`."""
    _absent("vllm")
    found = _run("import vllm", tmp_path)
    assert "No module named 'vllm'" == found["message"]
    assert "vllm-python-import" == found["record"]
    assert "not installed" == found["facts"]["vllm"]
    assert found["executable"] == found["facts"]["python"]
    [command] = _commands(found)
    assert f"{shlex.quote(found['executable'])} -m pip install vllm" == command
    _check_command(command, {"vllm": ("0.9.2", "0.11.0")}, tmp_path)


def test_a_folder_left_where_a_package_was_is_a_namespace_package(tmp_path):
    """A vllm/ folder without __init__.py on sys.path: "unknown location", and its path."""
    _absent("vllm")
    site = tmp_path / "site"
    (site / "vllm" / "model_executor").mkdir(parents=True)  # what a removal left behind
    found = _run("from vllm import LLM", tmp_path, pythonpath=site)
    assert "cannot import name 'LLM' from 'vllm' (unknown location)" == found["message"]
    assert "vllm-python-import" == found["record"]
    assert str(site / "vllm") == found["facts"]["shadowed by"]
    (text, settings), install = found["solutions"][:2]
    assert str(site / "vllm") == settings["path"]
    assert text.startswith(f"Move or rename {site / 'vllm'}")
    _check_command(install[1]["command"], {"vllm": ("0.9.2",)}, tmp_path)


def test_a_source_tree_in_the_working_folder_shadows_the_installed_transformers(tmp_path):
    """A transformers/ folder with __init__.py beside the program: the message's location."""
    pytest.importorskip("transformers")
    tree = tmp_path / "transformers"
    tree.mkdir()
    (tree / "__init__.py").write_text("", encoding="utf-8")
    found = _run("from transformers import AutoModel", tmp_path)
    assert found["message"].startswith("cannot import name 'AutoModel' from 'transformers' (")
    assert "transformers-python-import" == found["record"]
    assert str(tree / "__init__.py") == found["facts"]["shadowed by"]
    assert str(tree / "__init__.py") == found["solutions"][0][1]["path"]


def test_the_programs_own_torch_py_importing_itself(tmp_path):
    """torch.py beside the program: a circular import, and that file named as the cause."""
    pytest.importorskip("torch")
    own = tmp_path / "torch.py"
    own.write_text("from torch import nn\n", encoding="utf-8")
    found = _run("import torch", tmp_path)
    assert found["message"].startswith(
        "cannot import name 'nn' from partially initialized module 'torch' (most likely due to "
        "a circular import)"
    )
    assert "torch-python-import" == found["record"]
    assert str(own) == found["facts"]["shadowed by"]
    assert found["solutions"][0][0].startswith(f"Rename {own}:")


def test_the_programs_own_chattts_py_found_from_the_frames(tmp_path):
    """ChatTTS.py importing itself: the AttributeError form, whose message has no path."""
    _absent("ChatTTS")
    own = tmp_path / "ChatTTS.py"
    own.write_text("import ChatTTS\nchat = ChatTTS.Chat()\n", encoding="utf-8")
    found = _run("import ChatTTS", tmp_path)
    assert found["message"] == (
        "partially initialized module 'ChatTTS' has no attribute 'Chat' (most likely due to a "
        "circular import)"
    )
    assert "chattts-python-import" == found["record"]
    assert str(own) == found["facts"]["shadowed by"]
    assert str(own) == found["solutions"][0][1]["path"]


def test_a_ray_py_where_the_package_is_expected(tmp_path):
    """`import ray.tune` with a ray.py beside the program: "'ray' is not a package", its file."""
    _absent("ray")
    own = tmp_path / "ray.py"
    own.write_text("x = 1\n", encoding="utf-8")
    found = _run("import ray.tune", tmp_path)
    assert "No module named 'ray.tune'; 'ray' is not a package" == found["message"]
    assert "ray-python-import" == found["record"]
    assert str(own) == found["facts"]["shadowed by"]


def test_metadata_without_its_module_is_reinstalled_at_the_same_release(tmp_path):
    """vllm 0.6.3's metadata but no vllm/: the same release reinstalled, checked by pip."""
    _absent("vllm")
    site = tmp_path / "site"
    info = site / "vllm-0.6.3.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.6.3\n")
    found = _run("import vllm", tmp_path, pythonpath=site)
    assert "No module named 'vllm'" == found["message"]
    assert "0.6.3" == found["facts"]["vllm"]
    [command] = _commands(found)
    assert command.endswith("-m pip install --force-reinstall --no-deps 'vllm==0.6.3'")
    _check_command(command, {"vllm": ("0.6.3", "0.9.2")}, tmp_path)


def test_a_name_the_installed_release_lacks_says_only_what_is_known(tmp_path):
    """sentencepiece has no release data in errkb: the installed release, and no pin."""
    pytest.importorskip("sentencepiece")
    from importlib.metadata import version

    found = _run("from sentencepiece import NoSuchThing", tmp_path)
    assert found["message"].startswith("cannot import name 'NoSuchThing' from 'sentencepiece' (")
    assert "sentencepiece-python-import" == found["record"]
    assert version("sentencepiece") == found["facts"]["sentencepiece"]
    assert found["facts"]["`sentencepiece.NoSuchThing`"].startswith(
        "errkb has no release data of sentencepiece"
    )
    assert [] == _commands(found)


def test_a_removed_submodule_read_as_an_attribute_gets_the_release_that_has_it(tmp_path):
    """transformers.pipelines.conversational, removed in 4.42.0: the skew data's pin, by pip."""
    transformers = pytest.importorskip("transformers")
    if Version(transformers.__version__) < Version("4.42.0"):
        pytest.skip("this transformers still has transformers.pipelines.conversational")
    found = _run("import transformers.pipelines as p\np.conversational", tmp_path)
    assert "module 'transformers.pipelines' has no attribute 'conversational'" == found["message"]
    assert "transformers-python-import" == found["record"]
    assert found["facts"]["`transformers.pipelines.conversational`"].startswith(
        "`transformers.pipelines.conversational` was removed in transformers 4.42.0 (last in 4.41.2)"
    )
    [command] = _commands(found)
    assert command.endswith("-m pip install 'transformers<=4.41.2'")
    _check_command(command, {"transformers": ("4.41.2", "4.42.0", "5.0.0")}, tmp_path)


def test_a_submodule_read_before_it_is_imported_is_an_import_not_a_release(tmp_path):
    """`import safetensors` then `safetensors.torch`: the module's file, and the import to write."""
    safetensors = pytest.importorskip("safetensors")
    import importlib.util

    where = importlib.util.find_spec("safetensors.torch")
    if where is None or hasattr(safetensors, "torch"):
        pytest.skip("this safetensors has no safetensors.torch, or imports it itself")
    found = _run("import safetensors\nsafetensors.torch", tmp_path)
    assert "module 'safetensors' has no attribute 'torch'" == found["message"]
    assert "safetensors-python-import" == found["record"]
    assert where.origin == found["facts"]["`safetensors.torch`"]
    assert found["solutions"][0][0].endswith("write `import safetensors.torch` before using it.")
    assert [] == _commands(found)


def test_an_editable_install_outside_site_packages_is_not_called_a_shadow(tmp_path):
    """vllm installed with pip install -e: its source tree is the install, so skew, not shadow."""
    _absent("vllm")
    site, src = tmp_path / "site", tmp_path / "src"
    info = site / "vllm-0.9.2.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.9.2\n")
    (info / "direct_url.json").write_text(
        json.dumps({"url": src.as_uri(), "dir_info": {"editable": True}})
    )
    (src / "vllm").mkdir(parents=True)
    (src / "vllm" / "__init__.py").write_text("", encoding="utf-8")
    found = _run("from vllm import LLM", tmp_path, pythonpath=f"{site}{os.pathsep}{src}")
    assert (
        found["message"] == f"cannot import name 'LLM' from 'vllm' ({src / 'vllm' / '__init__.py'})"
    )
    assert "shadowed by" not in found["facts"]
    assert "0.9.2" == found["facts"]["vllm"]
    assert found["solutions"][0][0].startswith("vllm 0.9.2 has no `vllm.LLM`")
