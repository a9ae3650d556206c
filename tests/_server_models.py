"""Models a test server loads with ``memdir serve --model python:_server_models:NAME``.

:func:`gated` answers only once the test opens its gate: each call first leaves a file
``started-<n>`` in ``$MEMDIR_TEST_GATE`` (so the test waits for that, not for time), then waits
until a file ``open`` appears there. Its wait is an ``await``, so the job timeout cancels it.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path

from memdir.models import ChatModel
from memdir.testing import FunctionModel, ModelCall

GATE_ENV = "MEMDIR_TEST_GATE"
ANSWER = "- The gated fact: the deploy freeze starts on Friday"


def gated() -> ChatModel:
    """A model whose every call waits for the test's gate to open."""
    gate = Path(os.environ[GATE_ENV])

    async def answer(call: ModelCall) -> str:
        (gate / f"started-{uuid.uuid4().hex}").touch()
        while not (gate / "open").exists():
            await asyncio.sleep(0.02)
        return ANSWER

    return FunctionModel(answer, name="gated")
