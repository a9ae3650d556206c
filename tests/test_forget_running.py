"""A fact erased while a process still holds it: an agent mid-turn, a flush or a compaction
whose model is at work. None of them may write it back, on either store."""

from __future__ import annotations

import asyncio

from _canaries import KEPT, LATIN, MIXED, scan_store
from memdir import HarnessAgent
from memdir.compaction import CompactionConfig, ConversationCompactor
from memdir.forget import Target, apply_forget, plan_forget
from memdir.memory import MemoryFlushManager
from memdir.messages import Msg
from memdir.sessions import SessionLog
from memdir.testing import FunctionModel, ModelCall
from memdir.workspace import Workspace


def _forget(ws: Workspace, text: str) -> None:
    plan = plan_forget(ws, Target(text=text))
    assert not plan.empty, text
    apply_forget(ws, plan, by="test")


def test_an_agent_mid_turn_does_not_write_an_erased_message_back(any_ws: Workspace) -> None:
    calls = 0

    def model(call: ModelCall) -> str:
        nonlocal calls
        if call.task == "summarize":  # restates what it was given
            body = " ".join(m.text for m in call.messages)
            return f"## SESSION INTENT\nx\n## SUMMARY\n{body}\n## ARTIFACTS\nNone\n## NEXT STEPS\nx"
        if call.task is not None:
            return "NO_REPLY"
        calls += 1
        if calls == 3:  # another process erases the fact while this turn is at the model
            _forget(any_ws, LATIN)
        return "noted"

    agent = HarnessAgent(
        model=FunctionModel(model),
        workspace=any_ws,
        compaction=CompactionConfig(trigger_messages=50, keep_messages=2),
        memory_flush=False,
        maintenance=None,
    )
    agent.call_sync(f"Remember that the vault word is {LATIN}.")
    agent.call_sync(KEPT)
    agent.call_sync("What did we settle on for the staging database?")  # the forget lands here
    held = " ".join(m.text for m in agent.history())
    assert LATIN not in held and "6543" in held
    assert scan_store(any_ws, [LATIN]) == {}
    agent.call_sync("And the port once more?")
    asyncio.run(agent.compact())  # flushes, offloads and summarises what it held
    agent.close_sync()
    assert scan_store(any_ws, [LATIN]) == {}
    log = "".join(any_ws.read_text(rel) for rel, _ in any_ws.walk("sessions"))
    assert "6543" in log  # the rest of the conversation is offloaded as usual


def test_a_flush_whose_message_is_erased_meanwhile_writes_nothing_of_it(any_ws: Workspace) -> None:
    convo = [Msg.user(f"The release codename is {MIXED}, please keep it."), Msg.user(KEPT)]
    first = True

    def model(call: ModelCall) -> str:
        nonlocal first
        if first:
            first = False
            _forget(any_ws, MIXED)  # lands while the model reads the chunk
            return f"- Codename on file: {MIXED}\n- Staging database port: 6543"  # reworded
        return "- Staging database port: 6543"

    flush = MemoryFlushManager(any_ws, FunctionModel(model))
    SessionLog(any_ws, "s").append(convo)  # where the forget finds the message
    result = asyncio.run(flush.flush_memories(convo, session_id="s"))
    assert result.skipped == "erased" and not result.bullets
    again = asyncio.run(flush.flush_memories(convo, session_id="s"))  # still held by the caller
    assert again.bullets == ("Staging database port: 6543",)
    assert scan_store(any_ws, [MIXED]) == {}


def test_a_summary_written_while_its_message_is_erased_is_written_again(
    any_ws: Workspace,
) -> None:
    convo = [
        Msg.user(f"Remember that the vault word is {LATIN}."),
        Msg.assistant("Noted. " + "We went through the migration plan step by step. " * 40),
        Msg.user(KEPT),
        Msg.assistant("Noted. " + "The backfill runs in batches overnight. " * 40),
        Msg.user("Next question."),
    ]
    any_ws.write_text("MEMORY.md", f"# Memory\n\n- Vault word: {LATIN}\n")
    summaries = 0

    def model(call: ModelCall) -> str:
        nonlocal summaries
        summaries += 1
        if summaries == 1:
            _forget(any_ws, LATIN)
        said = " ".join(m.text for m in call.messages)
        secret = f"The vault word: {LATIN}." if LATIN in said else ""
        return (
            f"## SESSION INTENT\nx\n## SUMMARY\n{secret} Staging port 6543.\n"
            "## ARTIFACTS\nNone\n## NEXT STEPS\nx"
        )

    compactor = ConversationCompactor(
        FunctionModel(model),
        any_ws,
        config=CompactionConfig(keep_messages=1, flush_before_compact=False),
    )
    result = asyncio.run(compactor.compact_if_needed(convo, session_id="c", force=True))
    assert result is not None and summaries == 2
    text = " ".join(m.text for m in result.messages)
    assert "6543" in text and LATIN not in text
    assert scan_store(any_ws, [LATIN]) == {}
