"""Deprecated import path: :mod:`memdir.ingest.transcripts` holds this now.

``import memdir.transcripts`` keeps working, with a :class:`DeprecationWarning`, until memdir 0.3.
"""

from __future__ import annotations

import warnings
from typing import Any

from memdir.ingest import transcripts as _moved

__all__ = list(_moved.__all__)

warnings.warn(
    "memdir.transcripts is deprecated and will be removed in memdir 0.3: "
    "import memdir.ingest.transcripts",
    DeprecationWarning,
    stacklevel=2,
)


def __getattr__(name: str) -> Any:
    return getattr(_moved, name)


def __dir__() -> list[str]:
    return dir(_moved)
