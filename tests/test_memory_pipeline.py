"""The pipeline offline: ExtractiveModel flush → ledger → index → consolidation → MEMORY.md."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

from memdir.compaction import CompactionConfig, ConversationCompactor
from memdir.index import MemoryIndex
from memdir.memory import MemoryConsolidator, MemoryFlushManager
from memdir.memory._entries import parse_bullets
from memdir.messages import Msg, ToolResultBlock, ToolUseBlock
from memdir.models import ExtractiveModel
from memdir.workspace import Workspace

T0 = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)
SAID = [
    "I prefer dark roast coffee in the morning.",
    "We decided to deploy the billing service on Fridays.",
    "Remember that Carol owns the data pipeline.",
    "My password is hunter22, please keep it.",
    "我喜欢用 Vim 写代码。",
]


def talk(lines: list[str], start: int = 0) -> list[Msg]:
    out: list[Msg] = []
    for i, line in enumerate(lines, start):
        out.append(Msg(role="user", content=line, created_at=T0 + timedelta(minutes=2 * i)))
        out.append(
            Msg(role="assistant", content="Noted.", created_at=T0 + timedelta(minutes=2 * i + 1))
        )
    return out


def bullets(text: str) -> list[str]:
    return [b.text for b in parse_bullets(text)]


async def test_extractive_pipeline_end_to_end(ws: Workspace) -> None:
    model = ExtractiveModel()
    with MemoryIndex(ws) as index:
        flusher = MemoryFlushManager(ws, model, index=index)
        msgs = talk(SAID)
        first = await flusher.flush_memories(msgs, session_id="s1")
        assert first.written and first.path == "memory/2026-11-30.md"
        ledger = ws.read_text(first.path)
        assert "dark roast coffee" in ledger and "Carol owns the data pipeline" in ledger
        assert "hunter22" not in ledger
        # Indexed at once, only that file.
        hits = index.search("billing deploy Fridays")
        assert hits and hits[0].path == first.path
        # Said again in another session: nothing new is written.
        again = await flusher.flush_memories(talk(SAID[:2], start=10), session_id="s2")
        assert not again.written
        consolidator = MemoryConsolidator(ws, model, index=index)
        result = await consolidator.consolidate()
        assert result.applied and result.after_chars <= result.max_chars
        memory = ws.read_text("MEMORY.md")
        assert Counter(bullets(memory)).most_common(1)[0][1] == 1
        assert set(bullets(ledger)) <= set(bullets(memory))
        assert any(h.path == "MEMORY.md" for h in index.search("Carol data pipeline"))


async def test_compactor_flushes_its_prefix_once(ws: Workspace) -> None:
    model = ExtractiveModel()
    flusher = MemoryFlushManager(ws, model)
    compactor = ConversationCompactor(
        model,
        ws,
        CompactionConfig(trigger_messages=6, keep_messages=2),
        on_flush=flusher.flush_memories,
    )
    msgs = talk(SAID)
    compacted = await compactor.compact_if_needed(msgs, session_id="s1")
    assert compacted is not None
    written = bullets(ws.read_text(ws.ledger_rel()))
    assert any("dark roast coffee" in b for b in written)
    # The post-call flush over the compacted context adds only what is new.
    after = await flusher.flush_memories(compacted.messages, session_id="s1")
    assert not set(after.bullets) & set(written)
    final = bullets(ws.read_text(ws.ledger_rel()))
    assert len(final) == len(set(final))


async def test_a_request_pinned_by_compaction_mid_tool_loop_still_reaches_memory(
    ws: Workspace,
) -> None:
    # The user speaks once, then the assistant works through a long tool loop; compaction
    # happens mid-loop (before the post-reply flush ever ran), keeps the request verbatim
    # after the summary, and the flush after the reply gets the compacted context.
    model = ExtractiveModel()
    flusher = MemoryFlushManager(ws, model)
    compactor = ConversationCompactor(
        model,
        ws,
        CompactionConfig(trigger_messages=8, keep_messages=2),
        on_flush=flusher.flush_memories,
    )
    request = Msg(role="user", content=SAID[2], created_at=T0)
    msgs: list[Msg] = [request]
    for i in range(5):
        at = T0 + timedelta(minutes=2 * i + 1)
        call = ToolUseBlock(id=f"c{i}", name="grep", input={"pattern": f"step{i}"})
        msgs.append(Msg(role="assistant", content=[call], created_at=at))
        msgs.append(
            Msg(
                role="tool",
                content=[ToolResultBlock(tool_use_id=f"c{i}", name="grep", output="no match")],
                created_at=at + timedelta(seconds=30),
            )
        )
    compacted = await compactor.compact_if_needed(msgs, session_id="s1")
    assert compacted is not None and request in compacted.messages
    await flusher.flush_memories(compacted.messages, session_id="s1")
    written = bullets(ws.read_text(ws.ledger_rel()))
    assert sum("Carol owns the data pipeline" in b for b in written) == 1
