"""Models a test server loads with ``memdir serve --model python:_server_models:NAME``.

:func:`traced` extracts and merges for real, and writes when each merge starts and ends.

:func:`gated` answers only once the test opens its gate: each call first leaves a file
``started-<n>`` in ``$MEMDIR_TEST_GATE`` (so the test waits for that, not for time), then waits
until a file ``open`` appears there. Its wait is an ``await``, so the job timeout cancels it.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from pathlib import Path

from memdir.messages import Msg
from memdir.models import CURRENT_KEY, ENTRIES_KEY, MESSAGES_KEY, ChatModel
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


TRACE_ENV = "MEMDIR_TEST_TRACE"


def traced() -> ChatModel:
    """A model that extracts each user message as a fact, and merges new facts into
    ``MEMORY.md`` (each once) writing ``start`` and ``end`` lines (JSON: the process, the
    time, the entries) to the file ``$MEMDIR_TEST_TRACE``; with ``$MEMDIR_TEST_GATE`` set, a
    merge waits for the gate as :func:`gated` does (flushes do not)."""
    trace = Path(os.environ[TRACE_ENV])
    gate = os.environ.get(GATE_ENV)

    def note(event: str, entries: list[str]) -> None:
        line = {"event": event, "pid": os.getpid(), "at": time.time(), "entries": entries}
        with trace.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(line) + "\n")

    async def answer(call: ModelCall) -> str:
        meta = call.messages[-1].metadata
        if MESSAGES_KEY in meta:
            msgs = [Msg.from_dict(d) for d in meta[MESSAGES_KEY]]
            facts = [f"- {m.text}" for m in msgs if m.role == "user"]
            return "\n".join(facts) or "NO_REPLY"
        entries = [str(e) for e in meta[ENTRIES_KEY]]
        note("start", entries)
        if gate is not None:
            (Path(gate) / f"started-{uuid.uuid4().hex}").touch()
            while not (Path(gate) / "open").exists():
                await asyncio.sleep(0.02)
        await asyncio.sleep(0.02)  # long enough for another merge to overlap, if one could
        lines = [ln for ln in meta[CURRENT_KEY].splitlines() if ln.startswith("- ")]
        lines += [f"- {e}" for e in entries if f"- {e}" not in lines]
        note("end", entries)
        return "# Memory\n" + "\n".join(lines) + "\n"

    return FunctionModel(answer, name="traced")
