"""The check every message converter must pass when a model reuses its tool-call ids.

Models and frameworks that number calls per answer (``call_0`` every turn, llama.cpp-style
servers, scripted test models) reuse ids. A converted conversation of such turns must still be
compacted like any other: the window shrinks to the kept tail, no call is separated from its
result, and every summarised message is in the session log once, none merged with another.
"""

from __future__ import annotations

from collections.abc import Sequence

from memdir.compaction import CompactionConfig, ConversationCompactor
from memdir.compaction._pairing import find_orphans
from memdir.messages import Msg
from memdir.sessions import SessionLog
from memdir.testing import FunctionModel
from memdir.workspace import Workspace

SUMMARY = (
    "## SESSION INTENT\nLook keys up.\n## SUMMARY\nLooked several keys up.\n"
    "## ARTIFACTS\nNone\n## NEXT STEPS\nNone"
)
TURNS = 12
"""Tool turns in each converter's conversation."""


async def compact_reused(msgs: Sequence[Msg], ws: Workspace) -> list[Msg]:
    """Compact ``msgs`` (trigger 8, keep 4) and check the outcome; returns the new window."""
    assert len({m.id for m in msgs}) == len(msgs), "converted messages must have distinct ids"
    config = CompactionConfig(trigger_messages=8, trigger_tokens=0, keep_messages=4)
    compactor = ConversationCompactor(FunctionModel(lambda _: SUMMARY), ws, config)
    result = await compactor.compact_if_needed(list(msgs), session_id="s1")
    assert result is not None, "nothing was compacted"
    # summary, the pinned request, and a tail of 4-6 (a cut never splits a call from its result)
    assert result.messages_after <= 8, f"{result.messages_after} of {len(msgs)} messages kept"
    assert find_orphans(result.messages) == ([], [])
    logged = [r.msg for r in SessionLog(ws, "s1").read().records]
    assert [m.id for m in logged] == [m.id for m in msgs[: result.cut_index]]
    assert logged == list(msgs[: result.cut_index])
    return result.messages
