"""The python-import family: one definition, one small record per library of the stack.

Python words its import errors itself (``No module named 'vllm'``, ``cannot import name 'LLM'
from 'vllm' (unknown location)``, ``partially initialized module 'peft'``, ``module
'bitsandbytes' has no attribute 'nn'``), so what identifies the library is only the module the
message names. The records differ only in that module and the distribution that installs it:
this module holds the family's text once, and the table of libraries (record folder,
distribution, top-level modules); :func:`record` derives a library's record, and
``python -m errkb.advisors.python_import records`` writes them all
(``records/<library>/python-import.json``; a test checks the files are what this writes).

Every record is tagged ``fallback``: it ranks below every other record (see
:mod:`errkb.match`), so a record that names the module, the name or the release that changed
it (``records/transformers/*-removed.json``, the mined ``skew`` records) comes first.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import regex

from errkb._attrs import attrs

__all__ = ["LIBRARIES", "SLUG", "Library", "by_folder", "pattern", "record", "write"]

#: The file stem (and slug) of each library's record.
SLUG = "python-import"


@attrs.frozen(kw_only=True)
class Library:
    """A library of the stack as an import error names it.

    Attributes:
        folder: the record's folder under ``records/`` (the record's library).
        distribution: the distribution that installs it, as pip names it (PEP 503).
        modules: the top-level modules it installs, as Python names them in a message.
        examples: messages users reported (the tests cite each one's URL).
    """

    folder: str
    distribution: str
    modules: tuple[str, ...]
    examples: tuple[str, ...] = ()


#: The libraries of the stack and those next to it that users report import errors of. Each
#: example is an error line from a public issue tracker (tests/unit/test_python_import.py
#: cites each one's URL).
LIBRARIES: tuple[Library, ...] = (
    Library(
        folder="accelerate",
        distribution="accelerate",
        modules=("accelerate",),
        examples=(
            "ModuleNotFoundError: No module named 'accelerate'",
            (
                "Error while finding module specification for 'accelerate.commands.launch' "
                "(ModuleNotFoundError: No module named 'accelerate')"
            ),
        ),
    ),
    Library(
        folder="bitsandbytes",
        distribution="bitsandbytes",
        modules=("bitsandbytes",),
        examples=(
            "AttributeError: module 'bitsandbytes' has no attribute 'nn'",
            "AttributeError: module 'bitsandbytes.nn' has no attribute 'Linear4bit'",
        ),
    ),
    Library(
        folder="chattts",
        distribution="chattts",
        modules=("ChatTTS",),
        examples=(
            "ModuleNotFoundError: No module named 'ChatTTS'",
            (
                "AttributeError: partially initialized module 'ChatTTS' has no attribute 'Chat' "
                "(most likely due to a circular import)"
            ),
        ),
    ),
    Library(
        folder="deepspeed",
        distribution="deepspeed",
        modules=("deepspeed",),
        examples=(
            "AttributeError: module 'deepspeed' has no attribute 'ops'",
            "ModuleNotFoundError: No module named 'deepspeed'",
        ),
    ),
    Library(
        folder="flash_attn",
        distribution="flash-attn",
        modules=("flash_attn",),
        examples=(
            "ModuleNotFoundError: No module named 'flash_attn.flash_attention'",
            "AttributeError: module 'flash_attn' has no attribute 'flash_attn_varlen_qkvpacked_func'",
        ),
    ),
    Library(
        folder="huggingface_hub",
        distribution="huggingface-hub",
        modules=("huggingface_hub",),
        examples=(
            "ModuleNotFoundError: No module named 'huggingface_hub'",
            "ModuleNotFoundError: No module named 'huggingface_hub.errors'",
        ),
    ),
    Library(
        folder="peft",
        distribution="peft",
        modules=("peft",),
        examples=(
            "ModuleNotFoundError: No module named 'peft'",
            "ImportError: cannot import name 'get_peft_model' from 'peft' (unknown location)",
        ),
    ),
    Library(
        folder="ray",
        distribution="ray",
        modules=("ray",),
        examples=(
            "ModuleNotFoundError: No module named 'ray.tune'; 'ray' is not a package",
            "AttributeError: module 'ray' has no attribute 'remote'",
        ),
    ),
    Library(
        folder="safetensors",
        distribution="safetensors",
        modules=("safetensors",),
        examples=(
            "AttributeError: module 'safetensors' has no attribute 'torch'",
            "ModuleNotFoundError: No module named 'safetensors'",
        ),
    ),
    Library(
        folder="sentencepiece",
        distribution="sentencepiece",
        modules=("sentencepiece",),
        examples=(
            "ModuleNotFoundError: No module named 'sentencepiece'",
            "AttributeError: module 'sentencepiece' has no attribute 'SentencePieceTrainer'",
        ),
    ),
    Library(
        folder="tokenizers",
        distribution="tokenizers",
        modules=("tokenizers",),
        examples=(
            "ModuleNotFoundError: No module named 'tokenizers.tokenizers'",
            (
                "ImportError: cannot import name 'BPETokenizer' from 'tokenizers' "
                "(C:\\tools\\miniconda3\\envs\\tokenizer\\lib\\site-packages\\tokenizers\\__init__.py)"
            ),
        ),
    ),
    Library(
        folder="torch",
        distribution="torch",
        modules=("torch",),
        examples=(
            "ModuleNotFoundError: No module named 'torch'",
            "AttributeError: module 'torch' has no attribute 'classes'",
        ),
    ),
    Library(
        folder="torchaudio",
        distribution="torchaudio",
        modules=("torchaudio",),
        examples=(
            "ModuleNotFoundError: No module named 'torchaudio.prototype'",
            "AttributeError: module 'torchaudio' has no attribute 'open'",
        ),
    ),
    Library(
        folder="transformers",
        distribution="transformers",
        modules=("transformers",),
        examples=(
            "ImportError: cannot import name 'pipeline' from 'transformers' (unknown location)",
            "ModuleNotFoundError: No module named 'transformers'",
        ),
    ),
    Library(
        folder="triton",
        distribution="triton",
        modules=("triton",),
        examples=(
            "ImportError: cannot import name 'backends' from 'triton.backends' (unknown location)",
            "AttributeError: module 'triton.language' has no attribute 'make_block_ptr'",
        ),
    ),
    Library(
        folder="vllm",
        distribution="vllm",
        modules=("vllm",),
        examples=(
            "ImportError: cannot import name 'LLM' from 'vllm' (unknown location)",
            "AttributeError: module 'vllm' has no attribute '__version__'",
        ),
    ),
    Library(
        folder="xformers",
        distribution="xformers",
        modules=("xformers",),
        examples=(
            "AttributeError: module 'xformers.ops' has no attribute 'AttentionOpDispatch'",
            "ModuleNotFoundError: No module named 'xformers.version'",
        ),
    ),
)


def by_folder(folder: str) -> Library | None:
    """The library whose records live in ``records/<folder>``, if it is one of the family's."""
    return next((lib for lib in LIBRARIES if lib.folder == folder), None)


#: A quote as a message or a paste shows it: straight, double, typographic, or none.
_Q = "['\"\u2018\u2019]?"


def pattern(modules: tuple[str, ...]) -> str:
    r"""The family's pattern for a library's modules: three forms, each with its own groups.

    - ``missing`` (and ``not_package``): ``No module named 'vllm.x'``, ``'ray' is not a package``;
    - ``name``, ``module``, ``circular``, ``location``: ``cannot import name 'X' from 'vllm'``,
      ``from partially initialized module 'peft'``, the location Python adds in parentheses;
    - ``partial``, ``owner``, ``attribute``: ``module 'bitsandbytes' has no attribute 'nn'``,
      ``partially initialized module 'ChatTTS' has no attribute 'Chat'``.

    A module name ends where the message's name does: ``torch`` is not ``torchaudio``.
    """
    alt = "|".join(regex.escape(m) for m in modules)
    mod = rf"(?:{alt})(?:\.\w+)*(?![\w.])"
    missing = (
        rf"No module named {_Q}(?P<missing>{mod}){_Q}"
        rf"(?:; {_Q}(?P<not_package>{mod}){_Q} is not a package)?"
    )
    name = (
        rf"cannot import name {_Q}(?P<name>\w+){_Q} from "
        rf"(?P<circular>partially initialized module )?{_Q}(?P<module>{mod}){_Q}"
        r"(?: \(most likely due to a circular import\))?(?: \((?P<location>[^()\n]+)\))?"
    )
    attribute = (
        rf"(?P<partial>partially initialized )?[Mm]odule {_Q}(?P<owner>{mod}){_Q} "
        rf"has no attribute {_Q}(?P<attribute>\w+)"
    )
    return f"{missing}|{name}|{attribute}"


_DOCUMENTATION = (
    "Python's import system could not give the program {dist}'s module `{module}`, or a module "
    "or name inside it: none was found, the one found lacks the name, or the one found was still "
    "importing itself (a circular import). Find which `{module}` this Python reaches and from "
    "where, then install {dist} through that Python, move what shadows it, or install the "
    "release the code was written for. Python raises it, not {dist}: the module, the name and "
    "the location in the message, the traceback's frames and this Python's sys.path tell the "
    "four situations apart (see triggerScenarios)."
)

_TRIGGERS = (
    "(1) {dist} is not installed for the Python that ran the program (a `pip` of another Python "
    "or environment installed it). (2) Something named `{module}` comes first on sys.path: a "
    "folder without __init__.py (a cloned source tree, or what a half-removed install left: a "
    "namespace package, printed as 'unknown location'), a plain {module}.py where the package "
    "is expected ('{module}' is not a package), or the program's own {module}.py, which imports "
    "itself (partially initialized module). (3) The installed release lacks the module or name "
    "(code written for another release). (4) An install or removal stopped half way: the "
    "metadata is there, the module is not."
)

_SITUATIONS = (
    "Running a script with a `python` or `pip` of another environment; naming a script after "
    "the library; running from inside a clone of the library's repository; following a "
    "tutorial written for another release; a pip install interrupted or a removal half done."
)

_SOLUTIONS = (
    (
        'See which `{module}` this Python imports, and from where: `python -c "import sys; '
        "print(sys.executable); import {module}; print({module}.__file__, "
        "list(getattr({module}, '__path__', [])))\"`. A path outside site-packages (the current "
        "folder, a cloned source tree, your own {module}.py) hides the installed package: rename "
        "or move it, and delete the __pycache__ beside it."
    ),
    (
        "Install {dist} for the Python that runs the program, through that Python: `python -m "
        "pip install {dist}` (a `pip` command may belong to another Python)."
    ),
    (
        "If the installed release lacks the module or name, install the release the code was "
        "written for (its requirements pin it), or update the code for the installed one. A "
        "submodule is an attribute only once imported: `import {module}.sub`, not `import "
        "{module}` then `{module}.sub`."
    ),
)

_EXAMPLE_FIX = (
    "# before: the program's own file is named {module}.py, so `import {module}` imports it\n"
    "$ python {module}.py\n"
    "# after: renamed, and its cached copy removed\n"
    "$ mv {module}.py {module_lower}_demo.py && rm -rf __pycache__/{module}.*\n"
    "$ python {module_lower}_demo.py"
)

_TIPS = (
    "Install with `python -m pip`, using the interpreter that runs the program.",
    "Never name a script or a folder of your project after a library it imports.",
    "Pin the library's release in the project's requirements.",
)


def record(library: Library) -> dict[str, Any]:
    """The record of ``library``, derived from the family's definition."""
    module = library.modules[0]
    fill = {"dist": library.distribution, "module": module, "module_lower": module.lower()}
    return {
        "schemaVersion": 2,
        "id": f"{library.folder.replace('_', '-')}-{SLUG}",
        "slug": SLUG,
        "title": f"Python could not import {library.distribution}, or a module or name from it",
        "errorClass": "ImportError",
        "errorClasses": ["AttributeError"],
        "errorType": "dependency",
        "severity": "error",
        "errorMessage": f"No module named '{module}'",
        "messagePattern": pattern(library.modules),
        "documentation": _DOCUMENTATION.format(**fill),
        "triggerScenarios": _TRIGGERS.format(**fill),
        "commonSituations": _SITUATIONS,
        "solutions": [s.format(**fill) for s in _SOLUTIONS],
        "exampleFix": _EXAMPLE_FIX.format(**fill),
        "handlingStrategy": "fail-fast",
        "preventionTips": list(_TIPS),
        "tags": [SLUG, "fallback", "import-error", library.folder.replace("_", "-")],
        "advisors": [SLUG],
        "examples": list(library.examples),
        "counterexamples": [
            f"No module named '{module}_extras'",
            f"module '{module}x' has no attribute 'x'",
        ],
    }


def text(library: Library) -> str:
    """The record file's text, as :func:`write` writes it."""
    return json.dumps(record(library), indent=2, ensure_ascii=False) + "\n"


def write(records: Path) -> list[Path]:
    """Write every library's record under ``records``; the files written."""
    out = []
    for library in LIBRARIES:
        path = records / library.folder / f"{SLUG}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text(library), encoding="utf-8")
        out.append(path)
    return out
