"""The exception hook: the original traceback first, then errkb's diagnosis under it.

``install()`` wraps ``sys.excepthook`` (or, inside IPython, the shell's custom exception
handler) and keeps what was there: the previous hook still prints the traceback, exactly as
before. It also follows the errors Python reports and goes on: ``threading.excepthook``,
exceptions asyncio logs as never retrieved, and exceptions in ``atexit`` callbacks
(``sys.unraisablehook``). A hook set after ``install()`` (``rich.traceback.install()``, a
framework's own) does not remove the diagnosis: Python keeps the uncaught exception in
``sys.last_value``, and an exit handler diagnoses it when errkb's hook never saw it.

Whatever goes wrong inside errkb costs at most one line on stderr (``errkb: internal error:
...``; the details with ``ERRKB_DEBUG=1``), and the process exits with the status it would have
had. Nothing heavy is imported here: the diagnosis machinery loads on the first exception.
"""

from __future__ import annotations

import _thread
import atexit
import sys

from errkb._env import flag

# `typing` costs milliseconds to import; the annotations never need it at run time.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import logging
    import threading
    from collections.abc import Callable
    from importlib.machinery import ModuleSpec
    from types import ModuleType, TracebackType
    from typing import Any

    from errkb.findings import Diagnosis
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
    prev_unraisable: Any = None
    shell: Any = None
    prev_custom: Any = None
    asyncio_logger: Any = None
    #: The uncaught exception already diagnosed (it is ``sys.last_value``, so keeping it here
    #: keeps nothing alive that Python does not keep).
    seen: BaseException | None = None
    exit_registered = False
    threading_exit_registered = False


_state = _State()


def installed() -> bool:
    """Whether errkb's hook is installed now."""
    return _state.installed


def install(options: Options | None = None, **changes: Any) -> None:
    """Show a diagnosis under every uncaught exception the knowledge base knows.

    Idempotent: a second call only updates the options. The hooks that were set before are kept
    and still print the traceback; a hook set afterwards is kept too, and the diagnosis follows
    its output. ``ERRKB_DISABLE=1`` makes this a no-op. Inside IPython or Jupyter the shell's
    exception handler is used instead of ``sys.excepthook``.

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
            if not _state.exit_registered:
                atexit.register(_at_exit)
                _state.exit_registered = True
        _state.prev_unraisable = sys.unraisablehook
        sys.unraisablehook = _unraisablehook
        _watch_imports()
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
        elif sys.excepthook is _excepthook:
            sys.excepthook = _state.prev_sys
        if sys.unraisablehook is _unraisablehook:
            sys.unraisablehook = _state.prev_unraisable
        threading: Any = sys.modules.get("threading")
        if threading is not None and threading.excepthook is _threading_excepthook:
            threading.excepthook = _state.prev_threading
        logger = _state.asyncio_logger
        if logger is not None and vars(logger).get("callHandlers") is _asyncio_call_handlers:
            del logger.callHandlers
        _state.asyncio_logger = None
        if _ImportWatcher in sys.meta_path:
            sys.meta_path.remove(_ImportWatcher)
        _state.installed = False


# --- the modules followed once the program imports them ---------------------------------


def _patch_threading(threading: Any) -> None:
    """Wrap ``threading.excepthook``; diagnose at shutdown what a later hook kept from errkb.

    ``threading``'s shutdown callbacks run right after the main thread's hook, before Python
    waits for the threads still running: the diagnosis need not wait for them.
    """
    _state.prev_threading = threading.excepthook
    threading.excepthook = _threading_excepthook
    register = getattr(threading, "_register_atexit", None)  # private, but there since 3.9
    if _state.shell is None and not _state.threading_exit_registered and register is not None:
        try:
            register(_at_exit)
        except Exception:  # noqa: S110 - threading is shutting down: atexit still covers it
            pass
        else:
            _state.threading_exit_registered = True


def _patch_asyncio(asyncio: Any) -> None:
    """Diagnose what asyncio's exception handler logs on the ``asyncio`` logger, once logged.

    asyncio (and uvloop) report a task's exception that was never retrieved, and a callback's,
    through that logger; wrapping its ``callHandlers`` puts the diagnosis after the log output,
    whichever handlers print it, and survives any logging configuration.
    """
    logger = getattr(getattr(asyncio, "log", None), "logger", None)
    if logger is None or "callHandlers" in vars(logger):
        return
    logger.callHandlers = _asyncio_call_handlers
    _state.asyncio_logger = logger


#: What to wrap in each module errkb follows, as soon as the program imports it (importing
#: them here would cost ``install()`` milliseconds).
_FOLLOWED: dict[str, Callable[[Any], None]] = {
    "threading": _patch_threading,
    "asyncio": _patch_asyncio,
}


def _watch_imports() -> None:
    """Wrap the followed modules already imported; watch the imports of the others."""
    waiting = False
    for name, patch in _FOLLOWED.items():
        module = sys.modules.get(name)
        if module is None:
            waiting = True
        else:
            patch(module)
    if waiting and _ImportWatcher not in sys.meta_path:
        sys.meta_path.insert(0, _ImportWatcher)


class _ImportWatcher:
    """An import hook for the followed modules: once one is imported, wrap what it reports with."""

    @classmethod
    def find_spec(cls, name: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        if name not in _FOLLOWED or name in sys.modules:
            return None
        from importlib.machinery import PathFinder

        spec = PathFinder.find_spec(name, path, target)
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _PatchingLoader(spec.loader, name)  # type: ignore[assignment]
        return spec


class _PatchingLoader:
    def __init__(self, loader: Any, name: str) -> None:
        self._loader = loader
        self._name = name

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)  # type: ignore[no-any-return]

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        with _lock:
            if _state.installed:
                _FOLLOWED[self._name](module)
            if all(name in sys.modules for name in _FOLLOWED) and _ImportWatcher in sys.meta_path:
                sys.meta_path.remove(_ImportWatcher)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


def active_options() -> Options:
    """The options the hook diagnoses with: those given to :func:`install`, with its changes."""
    from errkb.options import Options

    base = _state.options or Options()
    return base.evolve(**_state.option_changes) if _state.option_changes else base


# --- the hooks ---------------------------------------------------------------------------


def _excepthook(etype: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
    prev = _state.prev_sys if _state.installed else None
    with _write_lock:
        try:
            (prev or sys.__excepthook__)(etype, value, tb)
        except Exception as err:
            _report_failed_hook(err, etype, value, tb)
        if _state.installed and not isinstance(value, KeyboardInterrupt):
            if value is _last_uncaught():
                _state.seen = value
            _diagnose_bounded(value)


def _report_failed_hook(
    err: Exception, etype: type[BaseException], value: BaseException, tb: TracebackType | None
) -> None:
    """What Python prints when ``sys.excepthook`` raises, without errkb's frame in it."""
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
        sys.stderr.write("Error in sys.excepthook:\n")
        # Python shows the traceback the exception carries: start it below errkb's frame.
        hook_tb = err.__traceback__.tb_next if err.__traceback__ is not None else None
        sys.__excepthook__(type(err), err.with_traceback(hook_tb), hook_tb)
        sys.stderr.write("\nOriginal exception was:\n")
        sys.__excepthook__(etype, value, tb)
        sys.stderr.flush()
    except Exception:  # noqa: S110 - stderr itself is gone; nothing left to tell
        pass


def _last_uncaught() -> BaseException | None:
    """The exception Python recorded as uncaught before calling ``sys.excepthook``."""
    value = getattr(sys, "last_exc", None)  # Python 3.12+
    if value is None:
        value = getattr(sys, "last_value", None)
    return value if isinstance(value, BaseException) else None


def _at_exit() -> None:
    """Diagnose the uncaught exception if errkb's hook never saw it (a later hook replaced it).

    Runs after ``sys.excepthook``, so the diagnosis follows that hook's output. A hook that
    calls errkb's got the diagnosis there, and :attr:`_State.seen` keeps it to once. Tools
    also leave exceptions in ``sys.last_value`` for post-mortem debugging (pytest does, for a
    failed test): only one that ended the main module is the process's uncaught exception.
    """
    with _write_lock:
        value = _last_uncaught()
        if (
            not _state.installed
            or _state.shell is not None
            or sys.excepthook is _excepthook  # errkb's hook saw every uncaught exception
            or value is None
            or value is _state.seen
            or isinstance(value, (KeyboardInterrupt, SystemExit))
            or not _ended_main(value)
        ):
            return
        _state.seen = value
        _diagnose_bounded(value)


def _ended_main(exc: BaseException) -> bool:
    """Whether ``exc`` went through the main module's top level (``__main__``'s ``<module>``)."""
    tb = exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_code.co_name == "<module>" and frame.f_globals.get("__name__") == "__main__":
            return True
        tb = tb.tb_next
    return False


def _threading_excepthook(args: threading.ExceptHookArgs) -> None:
    import threading

    prev = _state.prev_threading if _state.installed else None
    with _write_lock:
        (prev or threading.__excepthook__)(args)
        value = args.exc_value
        if _state.installed and value is not None and not isinstance(value, SystemExit):
            _diagnose_bounded(value)


#: How Python's message starts for an exception raised in an ``atexit`` callback.
_ATEXIT_ERROR = "Exception ignored in atexit callback"


def _unraisablehook(args: Any) -> None:
    """Diagnose exceptions of ``atexit`` callbacks, after Python's report of them.

    Other unraisable exceptions (``__del__``, garbage collection) only pass through: they come
    at any moment, from any thread, errkb's own included.
    """
    prev = (_state.prev_unraisable if _state.installed else None) or sys.__unraisablehook__
    message = getattr(args, "err_msg", None)
    if not (_state.installed and isinstance(message, str) and message.startswith(_ATEXIT_ERROR)):
        prev(args)
        return
    with _write_lock:
        prev(args)
        value = args.exc_value
        if value is not None and not isinstance(value, KeyboardInterrupt):
            _diagnose_bounded(value)


def _asyncio_call_handlers(record: logging.LogRecord) -> None:
    """``callHandlers`` of the ``asyncio`` logger: its handlers, then the diagnosis."""
    logger = _state.asyncio_logger or sys.modules["logging"].getLogger("asyncio")
    type(logger).callHandlers(logger, record)
    exc = record.exc_info[1] if isinstance(record.exc_info, tuple) else None
    if (
        _state.installed
        and isinstance(exc, Exception)
        and record.levelno >= 40  # logging.ERROR
        and getattr(record, "errkb", None) is None  # errkb.logging diagnosed it already
    ):
        with _write_lock:
            _diagnose_bounded(exc)


# --- the diagnosis -----------------------------------------------------------------------


def _diagnose_bounded(exc: BaseException, shell: Any = None) -> None:
    """Diagnose and show ``exc`` under errkb's guard (:mod:`errkb._guard`): bounded, never raising.

    Inside a Jupyter kernel (``shell``) the worker only builds the display bundle; it is
    published from this thread, the one the kernel attributes the cell's output to.
    """
    from errkb._gc import paused

    with paused():  # the imports and the work too (see errkb._guard.guarded)
        _diagnose_paused(exc, shell)


def _diagnose_paused(exc: BaseException, shell: Any) -> None:
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

    def bundles() -> list[dict[str, str]]:
        diagnosis = _diagnose(exc, options)
        return (
            []
            if diagnosis is None
            else [notebook.bundle(diagnosis, options.width or 100, options.detail)]
        )

    outcome = _guard.guarded(bundles, options.timeout)
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
    from errkb.render import render

    diagnosis = _diagnose(exc, options)
    if diagnosis is not None:
        render(diagnosis, options)


def _diagnose(exc: BaseException, options: Options) -> Diagnosis | None:
    """:func:`errkb.diagnose`, its notes worded for the hook (where probes are an option)."""
    import re

    from errkb.diagnosis import diagnose

    diagnosis = diagnose(exc, options=options)
    if diagnosis is None or not any("probes are off" in n for n in diagnosis.notes):
        return diagnosis
    from errkb._attrs import attrs

    # The probes' note names the CLI's flag; under the hook the switch is install()'s.
    notes = tuple(re.sub(_PROBES_OFF, _PROBES_OFF_HERE, n) for n in diagnosis.notes)
    return attrs.evolve(diagnosis, notes=notes)


_PROBES_OFF = r"probes are off(?: \([^)]*\))?"
_PROBES_OFF_HERE = "probes are off (install(probes=False))"


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
