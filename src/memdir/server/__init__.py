"""``memdir serve``: one memory for many agents, over HTTP, with a key per tenant.

Install with ``pip install 'memdir[server]'``. :func:`create_app` builds the ASGI application
over a workspace (a directory or PostgreSQL) and :func:`serve` runs it under uvicorn; keys are
made with ``memdir keys create`` (:mod:`memdir.server.auth`, which needs no web framework).
See ``docs/server.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memdir._lazy import lazy_exports

if TYPE_CHECKING:
    from memdir.server.app import create_app
    from memdir.server.runner import serve
    from memdir.server.settings import ServerSettings

__all__ = ["ServerSettings", "create_app", "serve"]

_LAZY = {
    "ServerSettings": "memdir.server.settings",
    "create_app": "memdir.server.app",
    "serve": "memdir.server.runner",
}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, __all__)
