"""``errkb serve``: errkb over HTTP, for support tooling, and a console page for a paste.

Needs the ``serve`` extra (Starlette and uvicorn). Nothing else in errkb imports this package,
so ``import errkb`` and the other commands never import Starlette.

>>> from errkb.serve import create_app  # doctest: +SKIP
>>> app = create_app(token="s3cret", timeout=10)  # doctest: +SKIP

The API (``/v1/explain``, ``/v1/scan``, ``/v1/records``, ``/v1/records/{id}``,
``/v1/model-shapes``, ``/healthz``) is described at ``/openapi.json`` and in
``docs/console.md``.
"""

from __future__ import annotations

from errkb.serve._app import CSP, create_app
from errkb.serve._limits import DEFAULT_TIMEOUT, MAX_JSON_BYTES, MAX_UPLOAD_BYTES
from errkb.serve._shapes import MODEL_SHAPES

__all__ = [
    "CSP",
    "DEFAULT_TIMEOUT",
    "MAX_JSON_BYTES",
    "MAX_UPLOAD_BYTES",
    "MODEL_SHAPES",
    "create_app",
]
