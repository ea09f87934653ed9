"""The exception hook: the original traceback first, then errkb's diagnosis under it.

``install()`` wraps ``sys.excepthook`` and ``threading.excepthook`` (or, inside IPython, the
shell's custom exception handler) and keeps what was there: the previous hook still prints the
traceback, exactly as before. Whatever goes wrong inside errkb afterwards costs at most one line
on stderr (``errkb: internal error: ...``; the details with ``ERRKB_DEBUG=1``), and the process
exits with the status it would have had. Nothing heavy is imported here: the diagnosis machinery
loads on the first exception.
"""

from __future__ import annotations

import _thread
import sys

from errkb._env import flag

# `typing` costs milliseconds to import; the annotations never need it at run time.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import threading
    from importlib.machinery import ModuleSpec
    from types import ModuleType, TracebackType
    from typing import Any

    from errkb.options import Options

__all__ = ["active_options", "diagnose_and_render", "install", "installed", "show", "uninstall"]

_lock = _thread.RLock()
_write_lock = _thread.RLock()


class _State:
    installed = False
    options: Options | None = None
    option_changes: dict[str, Any] = {}  # noqa: RUF012 - one process-wide state
    prev_sys: Any = None
    prev_threading: Any = None
    shell: Any = None
    prev_custom: Any = None


_state = _State()


def installed() -> bool:
    """Whether errkb's hook is installed now."""
    return _state.installed


def install(options: Options | None = None, **changes: Any) -> None:
    """Show a diagnosis under every uncaught exception the knowledge base knows.

    Idempotent: a second call only updates the options. The hooks that were set before are kept
    and still print the traceback. ``ERRKB_DISABLE=1`` makes this a no-op. Inside IPython or
    Jupyter the shell's exception handler is used instead of ``sys.excepthook``.

    Args:
        options: an :class:`errkb.Options`.
        **changes: fields of :class:`errkb.Options` to set on top of ``options``
            (``install(probes=False, timeout=2)``).
    """
    if flag("ERRKB_DISABLE"):
        return
    with _lock:
        _state.options, _state.option_changes = options, dict(changes)
        if _state.installed:
            return
        shell = _ipython_shell()
        if shell is not None:
            _install_ipython(shell)
        else:
            _state.prev_sys = sys.excepthook
            sys.excepthook = _excepthook
            threading = sys.modules.get("threading")
            if threading is not None:
                _patch_threading(threading)
            else:
                # Importing threading costs milliseconds; hook it when the program imports it.
                sys.meta_path.insert(0, _ThreadingWatcher)
        _state.installed = True


def uninstall() -> None:
    """Put back exactly the hooks that were there before :func:`install`."""
    with _lock:
        if not _state.installed:
            return
        if _state.shell is not None:
            shell = _state.shell
            shell.custom_exceptions, shell.CustomTB = _state.prev_custom
            _state.shell = _state.prev_custom = None
        else:
            if sys.excepthook is _excepthook:
                sys.excepthook = _state.prev_sys
            threading: Any = sys.modules.get("threading")
            if threading is not None and threading.excepthook is _threading_excepthook:
                threading.excepthook = _state.prev_threading
            if _ThreadingWatcher in sys.meta_path:
                sys.meta_path.remove(_ThreadingWatcher)
        _state.installed = False


def _patch_threading(threading: Any) -> None:
    _state.prev_threading = threading.excepthook
    threading.excepthook = _threading_excepthook


class _ThreadingWatcher:
    """A one-shot import hook: once ``threading`` is imported, wrap its excepthook."""

    @classmethod
    def find_spec(cls, name: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        if name != "threading":
            return None
        if cls in sys.meta_path:
            sys.meta_path.remove(cls)
        from importlib.machinery import PathFinder

        spec = PathFinder.find_spec(name, path, target)
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _PatchingLoader(spec.loader)  # type: ignore[assignment]
        return spec


class _PatchingLoader:
    def __init__(self, loader: Any) -> None:
        self._loader = loader

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)  # type: ignore[no-any-return]

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        with _lock:
            if _state.installed and _state.shell is None:
                _patch_threading(module)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


def active_options() -> Options:
    """The options the hook diagnoses with: those given to :func:`install`, with its changes."""
    from errkb.options import Options

    base = _state.options or Options()
    return base.evolve(**_state.option_changes) if _state.option_changes else base


def _excepthook(etype: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
    prev = _state.prev_sys if _state.installed else None
    with _write_lock:
        (prev or sys.__excepthook__)(etype, value, tb)
        if _state.installed and not isinstance(value, KeyboardInterrupt):
            _diagnose_bounded(value)


def _threading_excepthook(args: threading.ExceptHookArgs) -> None:
    import threading

    prev = _state.prev_threading if _state.installed else None
    with _write_lock:
        (prev or threading.__excepthook__)(args)
        value = args.exc_value
        if _state.installed and value is not None and not isinstance(value, SystemExit):
            _diagnose_bounded(value)


def _diagnose_bounded(exc: BaseException, shell: Any = None) -> None:
    """Diagnose and show ``exc`` under errkb's guard (:mod:`errkb._guard`): bounded, never raising.

    Inside a Jupyter kernel (``shell``) the worker only builds the display bundle; it is
    published from this thread, the one the kernel attributes the cell's output to.
    """
    from errkb import _guard

    try:
        options = active_options()
        notebook = None
        if shell is not None and options.file is None:
            from errkb import _notebook

            notebook = _notebook if _notebook.is_kernel(shell) else None
    except Exception as err:
        _guard.Outcome(problem=_guard.internal_error_line(err), error=err).report()
        return
    if notebook is None:
        _guard.guarded(lambda: diagnose_and_render(exc, options), options.timeout).report()
        return
    outcome = _guard.guarded(lambda: notebook.diagnose_bundle(exc, options), options.timeout)
    outcome.report()
    if outcome.value:
        try:
            notebook.publish(outcome.value[0])
        except Exception as err:
            _guard.Outcome(problem=_guard.internal_error_line(err), error=err).report()


def show(exc: BaseException) -> None:
    """Show the diagnosis of ``exc`` as the installed hook would (nothing when not installed).

    For places that catch an exception before any hook sees it, such as a ``multiprocessing``
    worker under start-up installation.
    """
    if _state.installed:
        _diagnose_bounded(exc)


def diagnose_and_render(exc: BaseException, options: Options) -> None:
    """Diagnose ``exc`` and render it; nothing at all when no record matches."""
    from errkb.diagnosis import diagnose
    from errkb.render import render

    diagnosis = diagnose(exc, options=options)
    if diagnosis is not None:
        render(diagnosis, options)


# --- IPython / Jupyter -------------------------------------------------------------------


def _ipython_shell() -> Any:
    """The running IPython shell, without importing IPython when it is not already loaded."""
    if "IPython" not in sys.modules:
        return None
    try:
        get = sys.modules["IPython"].get_ipython
        return get()
    except Exception:
        return None


def _install_ipython(shell: Any) -> None:
    _state.shell = shell
    _state.prev_custom = (shell.custom_exceptions, shell.CustomTB)

    def handler(
        self: Any, etype: type[BaseException], value: BaseException, tb: Any, tb_offset: Any = None
    ) -> Any:
        structured = self.showtraceback((etype, value, tb), tb_offset=tb_offset)
        if not isinstance(value, KeyboardInterrupt):
            with _write_lock:
                _diagnose_bounded(value, shell=self)
        return structured

    shell.set_custom_exc((BaseException,), handler)
