"""The crash-test hook, as the memory modules import it (it lives in :mod:`memdir._testpoint`,
which the tools import without loading the memory package)."""

from __future__ import annotations

from memdir._testpoint import pause_point

__all__ = ["pause_point"]
