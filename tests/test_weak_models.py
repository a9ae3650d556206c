"""Weak models' answers never become memory: echoed prompts, scaffolding, empty summaries.

Each weak answer below is one a small local model (Qwen2.5-Coder 0.5B / 1.5B on llama.cpp)
gave to memdir's requests. The good answers of ``tests/data/good_answers.toml`` (hand-written,
English and Chinese) and the extractive model's answers must all pass the same checks.
"""

from __future__ import annotations

import logging
import tomllib
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memdir.compaction import CompactionConfig, CompactionEvent, ConversationCompactor
from memdir.compaction.summary import DEFAULT_SUMMARY_PROMPT, SUMMARY_SECTIONS
from memdir.memory import MemoryConsolidator, MemoryFlushManager
from memdir.memory._entries import parse_bullets
from memdir.messages import SUMMARY_NAME, Msg
from memdir.models import CURRENT_KEY, ENTRIES_KEY, ExtractiveModel, ModelResponse
from memdir.store.ledger import append_bullets
from memdir.testing import FunctionModel, ModelCall
from memdir.workspace import Workspace

DATA = tomllib.loads((Path(__file__).parent / "data" / "good_answers.toml").read_text("utf-8"))
T0 = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)


def conversation(rows: list[list[str]]) -> list[Msg]:
    return [
        Msg(role=role, content=text, created_at=T0 + timedelta(minutes=i))  # type: ignore[arg-type]
        for i, (role, text) in enumerate(rows)
    ]


def ids(kind: str) -> list[str]:
    return [case["id"] for case in DATA[kind]]


# -- weak answers --------------------------------------------------------------------------------


def echo_in_memory_tags(call: ModelCall) -> str:
    """The 1.5B model's consolidation: the request itself, wrapped like the file it shows."""
    return "<MEMORY.md>\n" + call.last_user_text + "\n</MEMORY.md>"


def _section_descriptions() -> str:
    """The 0.5B model's summary: the prompt's four headings with the line under each."""
    lines = DEFAULT_SUMMARY_PROMPT.splitlines()
    return "\n\n".join(f"{h}\n{lines[lines.index(h) + 1]}" for h in SUMMARY_SECTIONS)


HEADINGS_ONLY_SUMMARY = _section_descriptions()
NONE_SUMMARY = "\n\n".join(f"{h}\nNone" for h in SUMMARY_SECTIONS)
MOSTLY_PROMPT_SUMMARY = HEADINGS_ONLY_SUMMARY.replace("What happened", "Fixed it.\nWhat happened")

PROMPT_LINE_BULLETS = """\
- Keep: preferences and habits; personal details people shared; decisions and their reasons;
- Skip: greetings and small talk; tool chatter and transient status; anything listed under
- Reply with the new bullets only, or NO_REPLY.
- Conversation to extract new facts from:
"""
TOOL_CALL_BULLETS = """\
- `<tools>` {"name": "memory_search", "arguments": {"query": "billing team"}}
- <tool_call>{"name": "memory_add", "arguments": {"text": "manager"}}</tool_call>
- {"name": "memory_get", "parameters": {"path": "MEMORY.md"}}
"""
BLOCK_HEADING_BULLETS = """\
- ## Memory Flush — 2026-11-30T09:00:00Z
- Memory Add — 2026-11-29T18:12:03Z
"""


# -- consolidation -------------------------------------------------------------------------------


def add(ws: Workspace, *bullets: str) -> None:
    append_bullets(ws, list(bullets), header="Memory Flush")


def merge(call: ModelCall) -> str:
    """A sound consolidator: the current bullets, then the new entries."""
    meta = call.messages[-1].metadata
    current = [ln for ln in str(meta[CURRENT_KEY]).splitlines() if ln.startswith("- ")]
    return "# Memory\n\n" + "\n".join([*current, *(f"- {e}" for e in meta[ENTRIES_KEY])]) + "\n"


@pytest.mark.parametrize("current", ["", "# Memory\n\n- Alice prefers green tea\n"])
async def test_an_echo_of_the_consolidation_request_never_becomes_memory_md(
    ws: Workspace, caplog: pytest.LogCaptureFixture, current: str
) -> None:
    if current:
        ws.write_text("MEMORY.md", current)
    add(ws, "Project X uses Postgres 16", "The backfill runs nightly")
    with caplog.at_level(logging.WARNING, logger="memdir.memory"):
        result = await MemoryConsolidator(ws, FunctionModel(echo_in_memory_tags)).consolidate()
    assert result.skipped == "unusable_answer" and not result.applied
    assert ws.read_text("MEMORY.md") == current
    assert "refused the answer: it repeats" in caplog.text
    assert "lines of the request" in caplog.text
    # The batch stays pending: the next sound answer merges it.
    again = await MemoryConsolidator(ws, FunctionModel(merge)).consolidate()
    assert again.added == ("Project X uses Postgres 16", "The backfill runs nightly")


async def test_an_answer_that_repeats_the_instructions_is_refused(ws: Workspace) -> None:
    add(ws, "Project X uses Postgres 16")

    def instructions_then_file(call: ModelCall) -> str:
        return f"{call.system}\n\n{merge(call)}"

    result = await MemoryConsolidator(ws, FunctionModel(instructions_then_file)).consolidate()
    assert result.skipped == "unusable_answer"
    assert not (ws.root / "MEMORY.md").exists()


@pytest.mark.parametrize(
    "wrap",
    [
        "<MEMORY.md>\n{}\n</MEMORY.md>",
        "```markdown\n<MEMORY.md>\n{}</MEMORY.md>\n```",
        "<MEMORY.md>\n{}",  # cut off before its closing tag
    ],
    ids=["tags", "fence-and-tags", "unclosed"],
)
async def test_the_file_tags_a_model_wraps_memory_md_in_are_not_written(
    ws: Workspace, wrap: str
) -> None:
    add(ws, "Project X uses Postgres 16")
    model = FunctionModel(lambda call: wrap.format(merge(call)))
    result = await MemoryConsolidator(ws, model).consolidate()
    assert result.skipped is None and result.added == ("Project X uses Postgres 16",)
    assert ws.read_text("MEMORY.md") == "# Memory\n\n- Project X uses Postgres 16\n"


async def test_headings_imitating_ledger_blocks_are_not_kept_as_sections(ws: Workspace) -> None:
    add(ws, "The backfill runs nightly", "Project X uses Postgres 16")
    answer = (
        "# Memory\n\n## Backfill runs — 2026-12-01T17:01:49Z\n- The backfill runs nightly\n\n"
        "## Memory Flush — 2026-11-30T09:00:00Z\n- Project X uses Postgres 16\n"
    )
    result = await MemoryConsolidator(ws, FunctionModel(lambda call: answer)).consolidate()
    assert result.skipped is None
    assert ws.read_text("MEMORY.md") == (
        "# Memory\n\n## Backfill runs\n- The backfill runs nightly\n\n"
        "- Project X uses Postgres 16\n"
    )


async def test_a_block_heading_written_as_a_bold_bullet_is_removed_and_its_items_kept(
    ws: Workspace,
) -> None:
    ws.write_text("MEMORY.md", "# Memory\n\n## Projects\n- Project Atlas moves to PostgreSQL.\n")
    add(ws, "The Atlas cutover is on 2026-12-12", "The backfill runs in batches of 2,000 rows")
    answer = (  # what Qwen2.5-Coder-1.5B answered
        "<MEMORY.md>\n# Memory\n## Projects\n- Project Atlas moves to PostgreSQL.\n"
        "- **Memory Flush — 2026-12-01T19:02:55Z**\n"
        "  - The Atlas cutover is on 2026-12-12\n"
        "  - **The backfill runs in batches of 2,000 rows**\n</MEMORY.md>"
    )
    result = await MemoryConsolidator(ws, FunctionModel(lambda call: answer)).consolidate()
    assert result.skipped is None
    assert ws.read_text("MEMORY.md") == (
        "# Memory\n## Projects\n- Project Atlas moves to PostgreSQL.\n"
        "- The Atlas cutover is on 2026-12-12\n- **The backfill runs in batches of 2,000 rows**\n"
    )


async def test_a_ledger_style_heading_the_user_wrote_stays(ws: Workspace) -> None:
    mine = "# Memory\n\n## Launch — 2026-12-01T09:00:00Z\n- The launch is at 09:00 UTC\n"
    ws.write_text("MEMORY.md", mine)
    add(ws, "Project X uses Postgres 16")

    def answer(call: ModelCall) -> str:
        return mine + "\n## Databases — 2026-11-30T09:00:00Z\n- Project X uses Postgres 16\n"

    result = await MemoryConsolidator(ws, FunctionModel(answer)).consolidate()
    assert result.skipped is None
    assert ws.read_text("MEMORY.md") == mine + "\n## Databases\n- Project X uses Postgres 16\n"


@pytest.mark.parametrize("case", DATA["memory"], ids=ids("memory"))
async def test_good_memory_md_answers_are_written_without_their_wrapper(
    ws: Workspace, caplog: pytest.LogCaptureFixture, case: dict[str, Any]
) -> None:
    if case["current"].strip():
        ws.write_text("MEMORY.md", case["current"].lstrip("\n"))
    add(ws, *case["entries"])
    model = FunctionModel(lambda call: "<MEMORY.md>\n" + case["answer"] + "\n</MEMORY.md>")
    with caplog.at_level(logging.WARNING, logger="memdir.memory"):
        result = await MemoryConsolidator(ws, model).consolidate()
    assert result.skipped is None, caplog.text
    written = ws.read_text("MEMORY.md")
    assert "MEMORY.md>" not in written
    assert [b.text for b in parse_bullets(written)] == [
        b.text for b in parse_bullets(case["answer"])
    ]


async def test_the_extractive_consolidation_passes_the_checks(
    ws: Workspace, caplog: pytest.LogCaptureFixture
) -> None:
    extractive = ExtractiveModel()

    async def wrapped(call: ModelCall) -> str:
        answer = await extractive.generate(call.messages, system=call.system)
        return "<MEMORY.md>\n" + answer.text + "\n</MEMORY.md>"

    with caplog.at_level(logging.WARNING, logger="memdir.memory"):
        for case in DATA["memory"]:
            add(ws, *case["entries"])
            result = await MemoryConsolidator(ws, FunctionModel(wrapped)).consolidate()
            assert result.skipped is None, (case["id"], caplog.text)
    written = ws.read_text("MEMORY.md")
    assert "MEMORY.md>" not in written and "refused" not in caplog.text
    for case in DATA["memory"]:
        assert all(entry in written for entry in case["entries"])


# -- summaries -----------------------------------------------------------------------------------


def compactor(
    ws: Workspace, answer: Any, **kw: Any
) -> tuple[ConversationCompactor, list[CompactionEvent]]:
    base: dict[str, Any] = {"trigger_messages": 4, "trigger_tokens": 0, "keep_messages": 1}
    base.update(kw)
    model = FunctionModel(answer if callable(answer) else lambda call: answer)
    comp = ConversationCompactor(model, ws, CompactionConfig(**base))
    events: list[CompactionEvent] = []
    comp.add_listener(events.append)
    return comp, events


DEBUG_CHAT = conversation(DATA["summary"][0]["messages"])


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        (HEADINGS_ONLY_SUMMARY, "nothing under its headings but the prompt's own lines"),
        (NONE_SUMMARY, "nothing under its headings but placeholders"),
        (MOSTLY_PROMPT_SUMMARY, "are the prompt's own"),
        (
            "## SUMMARY\nThe user and the assistant had a productive conversation about the "
            "project. They discussed the overall situation in detail, weighed several options "
            "and agreed on how to continue together in the coming days.",
            "names none of the",
        ),
    ],
    ids=["headings-and-descriptions", "none-everywhere", "mostly-prompt", "unrelated"],
)  # fmt: skip
async def test_a_summary_that_is_not_about_the_messages_leaves_the_context_as_it_was(
    ws: Workspace, caplog: pytest.LogCaptureFixture, answer: str, why: str
) -> None:
    comp, events = compactor(ws, answer)
    with caplog.at_level(logging.WARNING, logger="memdir.compaction"):
        result = await comp.compact_if_needed(DEBUG_CHAT, session_id="s1")
    assert result is None
    assert events[-1].kind == "compaction.failed"
    assert "the summary was refused" in events[-1].reason and why in events[-1].reason
    assert "the summary was refused" in caplog.text
    assert len(comp.model.calls) == 1  # the same request would get the same answer: no retry


async def test_a_forced_compaction_replaces_a_refused_summary_with_the_extractive_one(
    ws: Workspace,
) -> None:
    comp, events = compactor(ws, HEADINGS_ONLY_SUMMARY)
    filler = [
        Msg.assistant(f"Looked at retry case {i}. " + "Nothing new there. " * 30) for i in range(6)
    ]
    chat = [*DEBUG_CHAT[:4], *filler, *DEBUG_CHAT[4:]]
    result = await comp.compact_if_needed(chat, session_id="s1", force=True)
    assert result is not None and result.stages == ("extractive_summary",)
    assert "test_retry_backoff" in result.summary
    assert "What the user wants overall" not in result.summary
    assert events[-1].kind == "compaction.completed" and events[-1].model == "extractive"


@pytest.mark.parametrize("case", DATA["summary"], ids=ids("summary"))
async def test_good_summaries_replace_the_history_and_echoes_of_the_prompt_do_not(
    ws: Workspace, case: dict[str, Any]
) -> None:
    msgs = conversation(case["messages"])
    good, _ = compactor(ws, case["answer"])
    result = await good.compact_if_needed(msgs, session_id="good")
    assert result is not None and result.stages == ("summary",)
    assert result.summary == case["answer"].strip()
    weak, _ = compactor(ws, HEADINGS_ONLY_SUMMARY)
    assert await weak.compact_if_needed(msgs, session_id="weak") is None


async def test_the_extractive_summaries_pass_the_checks(ws: Workspace) -> None:
    extractive = ExtractiveModel()

    async def delegate(call: ModelCall) -> ModelResponse:
        return await extractive.generate(call.messages, max_output_tokens=call.max_output_tokens)

    for case in DATA["summary"]:
        msgs = conversation(case["messages"])
        comp, events = compactor(ws, delegate)
        result = await comp.compact_if_needed(msgs, session_id="s1")
        assert result is not None and result.stages == ("summary",), events[-1].reason
        # and the fold of that summary with what came after
        later = [result.messages[0], *conversation(case["messages"])[-3:]]
        folded = await comp.compact_if_needed(later, session_id="s1", force=True)
        assert folded is not None and folded.stages == ("summary",), case["id"]
        assert folded.messages[0].name == SUMMARY_NAME
        weak, _ = compactor(ws, NONE_SUMMARY)
        assert await weak.compact_if_needed(msgs, session_id="weak") is None


# -- flush ---------------------------------------------------------------------------------------


CHAT = conversation(
    [
        ["user", "My manager is Priya Raman and she leads the billing team."],
        ["assistant", "Got it."],
    ]
)


def ledger_bullets(ws: Workspace) -> list[str]:
    return [b.text for b in parse_bullets(ws.read_text(ws.ledger_rel()))]


@pytest.mark.parametrize(
    "answer",
    [PROMPT_LINE_BULLETS, TOOL_CALL_BULLETS, BLOCK_HEADING_BULLETS],
    ids=["prompt-lines", "tool-calls", "block-headings"],
)
async def test_flush_bullets_that_are_no_facts_are_never_written(
    ws: Workspace, caplog: pytest.LogCaptureFixture, answer: str
) -> None:
    manager = MemoryFlushManager(ws, FunctionModel(lambda call: answer))
    with caplog.at_level(logging.WARNING, logger="memdir.memory"):
        result = await manager.flush_memories(CHAT, session_id="s1")
    assert result.skipped == "unusable_answer" and not result.written
    assert not (ws.root / ws.ledger_rel()).exists()
    assert "that are not a fact" in caplog.text
    # The messages stay queued: a sound answer extracts them on the next flush.
    fact = "- Priya Raman manages the user and leads the billing team."
    again = await MemoryFlushManager(ws, FunctionModel(lambda call: fact)).flush_memories(
        CHAT, session_id="s1"
    )
    assert again.bullets == ("Priya Raman manages the user and leads the billing team.",)


async def test_only_the_facts_of_a_mixed_flush_answer_are_written(
    ws: Workspace, caplog: pytest.LogCaptureFixture
) -> None:
    answer = (
        "- Priya Raman leads the billing team.\n"
        + TOOL_CALL_BULLETS
        + PROMPT_LINE_BULLETS
        + BLOCK_HEADING_BULLETS
    )
    manager = MemoryFlushManager(ws, FunctionModel(lambda call: answer))
    with caplog.at_level(logging.WARNING, logger="memdir.memory"):
        result = await manager.flush_memories(CHAT, session_id="s1")
    assert result.bullets == ("Priya Raman leads the billing team.",)
    assert ledger_bullets(ws) == ["Priya Raman leads the billing team."]
    assert (
        "dropped 9 bullets that are not a fact "
        "(4 lines of the prompt, 3 tool calls written as text, 2 ledger block headings)"
    ) in caplog.text


@pytest.mark.parametrize("case", DATA["flush"], ids=ids("flush"))
async def test_good_flush_answers_are_written_whole(ws: Workspace, case: dict[str, Any]) -> None:
    answer = case["answer"] + TOOL_CALL_BULLETS
    manager = MemoryFlushManager(ws, FunctionModel(lambda call: answer))
    result = await manager.flush_memories(conversation(case["messages"]), session_id="s1")
    expected = [b.text for b in parse_bullets(case["answer"])]
    assert list(result.bullets) == expected and ledger_bullets(ws) == expected


async def test_the_extractive_flush_passes_the_checks(
    ws: Workspace, caplog: pytest.LogCaptureFixture
) -> None:
    extractive = ExtractiveModel()
    answers: list[str] = []

    async def with_a_tool_call(call: ModelCall) -> str:
        answer = (await extractive.generate(call.messages, system=call.system)).text
        answers.append(answer)
        return answer + "\n" + TOOL_CALL_BULLETS

    manager = MemoryFlushManager(ws, FunctionModel(with_a_tool_call))
    cases = [*DATA["flush"], *DATA["summary"]]
    with caplog.at_level(logging.WARNING, logger="memdir.memory"):
        for number, case in enumerate(cases):
            await manager.flush_memories(conversation(case["messages"]), session_id=f"s{number}")
    extracted = [b.text for a in answers for b in parse_bullets(a)]
    assert len(extracted) >= len(cases)
    assert ledger_bullets(ws) == list(dict.fromkeys(extracted))
    drops = [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()]
    assert drops and all(d.endswith("(3 tool calls written as text)") for d in drops)
