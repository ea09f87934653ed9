"""The diagnosis as rich output in a Jupyter notebook.

Inside an IPython kernel (ipykernel's ``ZMQInteractiveShell``) the hook publishes the diagnosis
as a display bundle, HTML with a plain-text fallback, so that it shows under the cell's
traceback the way the frontend shows any output. A terminal IPython keeps the text on stderr.
Exceptions of threads a cell started are not the cell's: the hook writes their diagnosis as
text, on the stream that shows the thread's traceback. Imported only when an exception
reaches the shell.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from errkb.findings import Diagnosis
    from errkb.render._document import Detail

__all__ = ["bundle", "is_kernel", "publish"]


def is_kernel(shell: Any) -> bool:
    """Whether ``shell`` runs inside a Jupyter kernel, whose frontend can show HTML.

    Decided from the class alone, so ipykernel is never imported to find out.
    """
    return any(cls.__name__ == "ZMQInteractiveShell" for cls in type(shell).__mro__)


def bundle(diagnosis: Diagnosis, width: int = 100, detail: Detail = "short") -> dict[str, str]:
    """The MIME bundle of ``diagnosis``: ``text/html`` and the ``text/plain`` fallback."""
    from errkb.render import render_html, render_plain

    return {
        "text/html": render_html(diagnosis, detail=detail),
        "text/plain": render_plain(diagnosis, width, detail=detail),
    }


def publish(data: dict[str, str]) -> None:
    """Show a MIME bundle in the running IPython shell's output area."""
    import IPython.display

    display: Any = IPython.display.display  # untyped in IPython
    display(data, raw=True)
