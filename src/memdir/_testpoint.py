"""Crash-test hook: pause at a named point so a test can ``kill -9`` the process there.

Set ``MEMDIR_TEST_PAUSE_AT=<point>`` and ``MEMDIR_TEST_PAUSE_FILE=<path>``; when the code
reaches that point it creates the file and sleeps (``MEMDIR_TEST_PAUSE_SECONDS``, default 60).
Without the variables this is a dictionary lookup and nothing else.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

__all__ = ["pause_point"]


def pause_point(name: str) -> None:
    """Pause here if ``$MEMDIR_TEST_PAUSE_AT`` names this point."""
    if os.environ.get("MEMDIR_TEST_PAUSE_AT") != name:
        return
    marker = os.environ.get("MEMDIR_TEST_PAUSE_FILE")
    if marker:
        Path(marker).write_text(str(os.getpid()), encoding="utf-8")
    time.sleep(float(os.environ.get("MEMDIR_TEST_PAUSE_SECONDS", "60")))
