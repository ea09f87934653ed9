"""vLLM's engine calls: which calls build an engine, which take its settings, where they run.

The KV family's specifics for the general rewriter (:mod:`errkb.advisors._callsite`), which
knows no library:

* :data:`ENGINE_CALLS` build an engine; :data:`ENGINE` says which of them take its settings
  (``LLM``, ``EngineArgs``) and which take an ``EngineArgs`` (``from_engine_args``, and
  ``from_vllm_config`` of ``engine_args.create_engine_config()``), the rewriter's
  :class:`~errkb.advisors._callsite.Accepting`;
* :func:`engine_file` tells vLLM's own files, which are never the user's;
* :func:`wrap_library_call` reaches an engine built inside an installed library from the
  user's file;
* :func:`pasted_command` and :func:`typed_command` find the command that started vLLM's server
  (``vllm serve``, ``python -m vllm.entrypoints.openai.api_server``).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from errkb._patterns import lazy_compile
from errkb.advisors._callsite import (
    Accepting,
    CallSite,
    Passing,
    binding_of,
    find_call,
    insert_before,
    literal,
    rewrite_call,
)

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from errkb.advisors._callsite import Rewrite
    from errkb.findings import FrameInfo

__all__ = [
    "ENGINE",
    "ENGINE_CALLS",
    "SERVE_LINE",
    "command_flag",
    "engine_file",
    "find_engine_call",
    "pasted_command",
    "rewrite_settings",
    "typed_command",
    "wrap_library_call",
]


def engine_file(path: str) -> bool:
    """Whether ``path`` is a file of vLLM itself (a ``vllm`` package), not code that uses it.

    A ``vllm`` folder counts when it is a package (its ``__init__.py`` exists) or, for a pasted
    traceback whose files are not here, when it sits in site-packages or dist-packages.
    """
    parts = os.path.normcase(path).replace("\\", "/").split("/")
    for i, part in enumerate(parts[:-1]):
        if part != "vllm":
            continue
        if i > 0 and parts[i - 1] in ("site-packages", "dist-packages"):
            return True
        if Path("/".join([*parts[: i + 1], "__init__.py"])).is_file():
            return True
    return False


#: Names of the calls that build an LLM engine (the last part of a dotted call).
ENGINE_CALLS = frozenset(
    {
        "LLM",
        "EngineArgs",
        "AsyncEngineArgs",
        "LLMEngine",
        "AsyncLLMEngine",
        "AsyncLLM",
        "from_engine_args",
        "from_vllm_config",
    }
)
#: Where the engine takes its settings: the keywords of ``LLM`` (which passes its ``**kwargs``
#: on) and ``EngineArgs``, reached through the ``EngineArgs`` that ``from_engine_args`` and
#: ``from_vllm_config`` take (their first argument, or this keyword).
ENGINE = Accepting(
    calls=frozenset({"LLM", "EngineArgs", "AsyncEngineArgs"}),
    passing={
        "from_engine_args": Passing(argument="engine_args"),
        "from_vllm_config": Passing(
            argument="vllm_config", derived=frozenset({"create_engine_config"})
        ),
    },
    own_file=engine_file,
)


def find_engine_call(frames: Sequence[FrameInfo]) -> CallSite | None:
    """The outermost frame whose current line is inside an engine-building call.

    Outermost first: when ``LLM(...)`` in the user's code calls ``LLMEngine.from_engine_args``
    inside vLLM, the user's call is the one to change.
    """
    return find_call(frames, ENGINE_CALLS, engine_file)


def rewrite_settings(
    frames: Sequence[FrameInfo], index: int, settings: Mapping[str, object]
) -> Rewrite | None:
    """Write ``settings`` into the user's code where frame ``index``'s engine call takes them.

    None when the code's shape is one the rewriter does not handle: no fix beats a wrong one.
    """
    return rewrite_call(frames, index, frames[index].line, ENGINE_CALLS, settings, ENGINE)


def wrap_library_call(site: CallSite, settings: Mapping[str, object]) -> Rewrite | None:
    """Give an engine built inside a library ``settings``, from the user's file.

    The library's file is never edited. Before the user's statement that calls into the
    library, a few lines replace the engine class the library calls with one that passes the
    settings, so this run of the library builds its engine with them. None when the user's call
    or the library's lookup cannot be seen.
    """
    user = site.user_frame
    binding = binding_of(site.file, site.line, ENGINE_CALLS)
    if user is None or binding is None:
        return None
    shown = {k: literal(v) for k, v in settings.items()}
    if any(v is None for v in shown.values()):
        return None
    values = ", ".join(f"{json.dumps(k)}: {v}" for k, v in shown.items())
    module, attr = binding
    where = f"{Path(site.file).name}:{site.line}"
    return insert_before(
        user,
        [
            f"import {module} as _engine_home  # the engine {attr}() is built inside a library ({where})",
            f"_build_engine = _engine_home.{attr}",
            f"_engine_home.{attr} = lambda *args, **kwargs: _build_engine(*args, **{{**kwargs, {values}}})",
        ],
    )


# --- The command that started vLLM's server -------------------------------------------------


def _program(argv: Sequence[str]) -> str | None:
    """How the command that started vLLM is typed: ``vllm``, or ``python -m <module>``."""
    if not argv:
        return None
    name = Path(argv[0]).name
    if name == "vllm":
        return "vllm"
    if name.endswith(".py") and engine_file(argv[0]):
        parts = Path(argv[0]).with_suffix("").parts
        return "python -m " + ".".join(parts[len(parts) - parts[::-1].index("vllm") - 1 :])
    return None


def typed_command(argv: Sequence[str] | None = None) -> list[str] | None:
    """This process's command line (``sys.argv``) as typed, when it started vLLM; else None."""
    argv = sys.argv if argv is None else argv
    program = _program(argv)
    return None if program is None else [program, *argv[1:]]


#: A command that starts vLLM's server, in a line of a pasted text: ``vllm serve MODEL ...``
#: or ``python -m vllm.entrypoints.openai.api_server ...`` (the older ``...entrypoints.
#: api_server`` too), after whatever prompt or log prefix stands before it.
_SERVE = lazy_compile(
    r"(?:^|(?<=[\s$#>:;&|(]))(?P<program>(?:[\w.~/-]*/)?vllm\s+serve(?=\s+[^\s-]))(?P<args>.*)$"
    r"|(?:^|(?<=[\s$#>:;&|(]))(?:[\w.~/-]*/)?(?P<python>python[\d.]*)(?:\s+-[^\s-m]\S*)*\s+"
    r"-m\s+(?P<module>vllm\.entrypoints\.(?:openai\.)?api_server)\b(?P<margs>.*)$"
)
#: Where a shell command line ends: a pipe, a redirection, the next command.
_SHELL_END = lazy_compile(r"^(?:\||\|\||&&|;|&|\d*>.*|<.*)$")
#: A line of an example that runs vLLM's server, which takes the flags it lacks.
SERVE_LINE = lazy_compile(r"\s*vllm\s+serve\b")


def pasted_command(text: str | None) -> list[str] | None:
    """The last command line in ``text`` that starts vLLM's server, as typed; else None.

    ``["vllm", "serve", "MODEL", "--max-model-len", "131072"]``, or ``["python -m
    vllm.entrypoints.openai.api_server", "--model", ...]`` (the program as one word, as
    :func:`errkb.advisors._callsite.rewrite_command` takes it). Lines continued with a
    backslash are joined; a pipe or a redirection ends the command; a line that does not split
    as a shell would split it is passed over.
    """
    import shlex

    if not text:
        return None
    found = None
    for line in text.replace("\\\r\n", " ").replace("\\\n", " ").splitlines():
        m = _SERVE.search(line)
        if m is None:
            continue
        if m.group("program") is not None:
            program, rest = "vllm", "serve" + m.group("args")
        else:
            program, rest = f"{m.group('python')} -m {m.group('module')}", m.group("margs")
        try:
            args = shlex.split(rest)
        except ValueError:
            continue
        end = next((i for i, a in enumerate(args) if _SHELL_END.match(a)), len(args))
        found = [program, *args[:end]]
    return found


def command_flag(argv: Sequence[str], key: str) -> str | None:
    """The value ``argv`` gives the flag of ``key`` (``--max-model-len 4096`` or ``=4096``)."""
    flag = "--" + key.replace("_", "-")
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(flag + "="):
            return arg[len(flag) + 1 :]
    return None
