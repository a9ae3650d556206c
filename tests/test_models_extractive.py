"""ExtractiveModel: summaries, memory flush and consolidation without a language model."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memdir.errors import ModelError
from memdir.messages import SUMMARY_NAME, Msg, ToolResultBlock, ToolUseBlock
from memdir.models import (
    CURRENT_KEY,
    ENTRIES_KEY,
    KNOWN_KEY,
    MAX_CHARS_KEY,
    MESSAGES_KEY,
    NO_REPLY,
    TASK_KEY,
    ChatModel,
    ExtractiveModel,
)
from memdir.models.extractive._extract_memory import consolidate, extract_facts
from memdir.models.extractive._extract_summary import parse_summary, summarize
from memdir.store.ledger import normalize_bullet


async def ask(task: str, max_output_tokens: int | None = None, **meta: Any) -> str:
    model = ExtractiveModel()
    assert isinstance(model, ChatModel)
    prompt = Msg.user(f"(instructions for {task})", metadata={TASK_KEY: task, **meta})
    resp = await model.generate([prompt], max_output_tokens=max_output_tokens)
    assert resp.tool_calls == ()
    return resp.text


def dicts(msgs: list[Msg]) -> list[dict[str, Any]]:
    return [m.to_dict() for m in msgs]


CODING_SESSION = [
    Msg.user("Please fix the failing test in tests/test_app.py. I prefer pytest over unittest."),
    Msg.assistant(
        "Let me look.",
        tool_calls=[
            ToolUseBlock(id="c1", name="read_file", input={"path": "tests/test_app.py"}),
            ToolUseBlock(id="c2", name="bash", input={"command": "pytest -q tests/test_app.py"}),
        ],
    ),
    Msg(
        role="tool",
        content=(
            ToolResultBlock(tool_use_id="c1", name="read_file", output="def test_add(): ..."),
            ToolResultBlock(
                tool_use_id="c2",
                name="bash",
                output="FAILED tests/test_app.py::test_add - AssertionError: 3 != 4",
                is_error=True,
            ),
        ),
    ),
    Msg.assistant(
        "We decided to correct the expected value. See https://docs.pytest.org/en/stable/ "
        "for details. Next, I will run the full suite."
    ),
    Msg.user("Good. Then update docs/usage.md with the new `make test` target."),
]


# -- summarize -------------------------------------------------------------------------------


async def test_summary_has_the_four_sections_filled_from_the_conversation() -> None:
    text = await ask("summarize", **{MESSAGES_KEY: dicts(CODING_SESSION)})
    sections = parse_summary(text)
    assert list(sections) == ["SESSION INTENT", "SUMMARY", "ARTIFACTS", "NEXT STEPS"]
    assert text.index("## SESSION INTENT") < text.index("## SUMMARY") < text.index("## ARTIFACTS")
    intent = "\n".join(sections["SESSION INTENT"])
    assert "fix the failing test" in intent and "update docs/usage.md" in intent
    summary = "\n".join(sections["SUMMARY"])
    assert "I prefer pytest over unittest" in summary
    assert "We decided to correct the expected value" in summary
    assert "Error (bash `pytest -q tests/test_app.py`): FAILED tests/test_app.py::" in summary
    assert "read_file ×1" in summary and "bash ×1" in summary
    artifacts = sections["ARTIFACTS"]
    assert "- tests/test_app.py" in artifacts
    assert "- `pytest -q tests/test_app.py` (failed)" in artifacts  # from the tool call
    assert "- `make test`" in artifacts
    assert "- https://docs.pytest.org/en/stable/" in artifacts
    assert "- docs/usage.md" in artifacts
    assert len(artifacts) == len(set(artifacts))
    steps = "\n".join(sections["NEXT STEPS"])
    assert "Open user request: Good. Then update docs/usage.md" in steps
    assert "Next, I will run the full suite." in steps


async def test_summary_in_chinese_and_pending_tool_call() -> None:
    msgs = [
        Msg.user("帮我分析 data/sales.csv 的销售数据。我们决定用季度汇总。"),
        Msg.assistant(
            tool_calls=[ToolUseBlock(id="t1", name="run_sql", input={"query": "select 1"})]
        ),
    ]
    text = await ask("summarize", **{MESSAGES_KEY: dicts(msgs)})
    sections = parse_summary(text)
    assert any("帮我分析" in line for line in sections["SESSION INTENT"])
    assert any("决定：我们决定用季度汇总" in line for line in sections["SUMMARY"])
    assert "- data/sales.csv" in sections["ARTIFACTS"]
    steps = "\n".join(sections["NEXT STEPS"])
    assert "未完成的工具调用：run_sql" in steps
    assert "未完成的用户请求：帮我分析" in steps


async def test_an_earlier_summary_is_folded_in() -> None:
    first = await ask("summarize", **{MESSAGES_KEY: dicts(CODING_SESSION)})
    summary_msg = Msg.user(
        f"The conversation so far was summarised.\n<summary>\n{first}</summary>", name=SUMMARY_NAME
    )
    later = [
        summary_msg,
        Msg.user("Now add a changelog entry in CHANGELOG.md for the fix."),
        Msg.assistant("Done: CHANGELOG.md updated."),
    ]
    text = await ask("summarize", **{MESSAGES_KEY: dicts(later)})
    sections = parse_summary(text)
    # Old artifacts carried over once, new ones added.
    assert sections["ARTIFACTS"].count("- tests/test_app.py") == 1
    assert "- CHANGELOG.md" in sections["ARTIFACTS"]
    intent = "\n".join(sections["SESSION INTENT"])
    assert "fix the failing test" in intent and "changelog entry" in intent
    assert any("Error (bash" in line for line in sections["SUMMARY"])
    # Next steps are about the newest request, not the old one.
    steps = "\n".join(sections["NEXT STEPS"])
    assert "changelog" in steps and "docs/usage.md" not in steps
    assert text.count("## SUMMARY") == 1
    # Summarising the same input twice gives the same text.
    assert text == await ask("summarize", **{MESSAGES_KEY: dicts(later)})


async def test_summary_respects_the_output_budget() -> None:
    many = [Msg.user(f"I prefer option {i} for component c{i}.") for i in range(40)]
    full = await ask("summarize", **{MESSAGES_KEY: dicts(many)})
    small = await ask("summarize", max_output_tokens=150, **{MESSAGES_KEY: dicts(many)})
    assert len(small) <= 150 * 3 < len(full)
    assert "option 39" in small  # the newest facts survive
    assert list(parse_summary(small)) == list(parse_summary(full))


async def test_summary_of_nothing_has_empty_sections() -> None:
    text = await ask("summarize", **{MESSAGES_KEY: []})
    assert text.count("None") == 4


# -- flush -----------------------------------------------------------------------------------


async def test_flush_extracts_durable_facts_in_english_and_chinese() -> None:
    msgs = [
        Msg.user("Hi! My name is Dana and I prefer dark mode in every editor."),
        Msg.assistant("Noted. I will keep that in mind."),
        Msg.user("Remember that the board meeting deadline is March 3."),
        Msg.user("What time is it?"),
        Msg.user(
            "我喜欢喝乌龙茶。我们决定下周三上线新版本。记住：合同截止日期是12月15日。",
            created_at=datetime(2026, 11, 30, 9, 0, tzinfo=UTC),  # a Monday
        ),
        Msg.user("By the way my API key is sk-abcdefghijklmnopqrstuv, remember it."),
        Msg.user("The weather is nice."),
    ]
    text = await ask("flush", **{MESSAGES_KEY: dicts(msgs), KNOWN_KEY: ""})
    bullets = text.splitlines()
    assert all(b.startswith("- ") for b in bullets)
    joined = "\n".join(bullets)
    assert "- User: My name is Dana and I prefer dark mode in every editor." in bullets
    assert "- User: the board meeting deadline is March 3." in bullets
    assert "- 用户：我喜欢喝乌龙茶。" in bullets
    assert "- 用户：我们决定下周三（2026-12-09）上线新版本。" in bullets
    assert "- 用户：合同截止日期是12月15日。" in bullets
    assert "What time" not in joined and "weather" not in joined
    assert "sk-abc" not in joined  # credentials are never remembered
    assert "Noted" not in joined  # assistant chatter is not a user fact


async def test_flush_skips_what_is_already_known() -> None:
    msgs = [
        Msg.user("I prefer tea over coffee."),
        Msg.user("我喜欢喝乌龙茶。"),
    ]
    known = (
        "# Memory\n## Preferences\n- User: I prefer tea over coffee\n\n"
        "## Memory Flush — 2026-11-30T09:00:00Z\n- 用户：我喜欢喝乌龙茶\n"
    )
    assert await ask("flush", **{MESSAGES_KEY: dicts(msgs), KNOWN_KEY: known}) == NO_REPLY
    fresh = [*msgs, Msg.user("I live in Lyon.")]
    assert await ask("flush", **{MESSAGES_KEY: dicts(fresh), KNOWN_KEY: known}) == (
        "- User: I live in Lyon."
    )


async def test_flush_of_small_talk_is_no_reply() -> None:
    msgs = [Msg.user("Thanks!"), Msg.assistant("You're welcome."), Msg.user("好的")]
    assert await ask("flush", **{MESSAGES_KEY: dicts(msgs), KNOWN_KEY: ""}) == NO_REPLY


async def test_flush_dedupes_within_the_batch_and_skips_summaries() -> None:
    msgs = [
        Msg.user("I prefer vim."),
        Msg.user("i prefer vim"),
        Msg.user("## SESSION INTENT\n- I prefer emacs", name=SUMMARY_NAME),
    ]
    text = await ask("flush", **{MESSAGES_KEY: dicts(msgs), KNOWN_KEY: ""})
    assert text == "- User: I prefer vim."


# -- consolidate -----------------------------------------------------------------------------

CURRENT = """# Memory

Notes I keep by hand: do not lose this line.

## Preferences
- User prefers dark roast coffee
- User: I prefer tabs
- User: I prefer tabs.

## Travel
- Passport expires 2027-03
"""


async def test_consolidate_merges_dedupes_and_groups() -> None:
    entries = [
        "- User prefers light roast coffee",
        "- 用户：我喜欢喝乌龙茶",
        "- User: We decided to use PostgreSQL for the billing service",
        "- User: My manager is Alice Chen",
        "- User: the release deadline for project Atlas is May 1",
        "- User: the release deadline for project Borealis is May 1",
        "- User: I live in Lyon",
        "- User: I prefer tabs",
    ]
    text = await ask(
        "consolidate", **{CURRENT_KEY: CURRENT, ENTRIES_KEY: entries, MAX_CHARS_KEY: 4000}
    )
    assert text.startswith("# Memory\n\nNotes I keep by hand: do not lose this line.\n")
    headers = [line for line in text.splitlines() if line.startswith("## ")]
    assert headers == [
        "## Preferences",
        "## People",
        "## Decisions",
        "## Projects",
        "## Facts",
        "## Travel",
    ]
    # Newest wins on a near-duplicate; exact repeats collapse; different names stay apart.
    assert "light roast" in text and "dark roast" not in text
    assert text.count("I prefer tabs") == 1
    assert "project Atlas" in text and "project Borealis" in text
    assert "- User: My manager is Alice Chen" in text.split("## People")[1].split("##")[0]
    assert "PostgreSQL" in text.split("## Decisions")[1].split("##")[0]
    assert "我喜欢喝乌龙茶" in text.split("## Preferences")[1].split("##")[0]
    assert "- Passport expires 2027-03" in text
    # Running it again on its own output with the same entries changes nothing.
    again = await ask(
        "consolidate", **{CURRENT_KEY: text, ENTRIES_KEY: entries, MAX_CHARS_KEY: 4000}
    )
    assert again == text


async def test_consolidate_respects_the_budget_dropping_least_important_oldest() -> None:
    entries = [f"- User: fact number {i} about the garden shed" for i in range(60)]
    entries += ["- User: I prefer green tea", "- User: Important: never deploy on Fridays"]
    text = await ask("consolidate", **{CURRENT_KEY: "", ENTRIES_KEY: entries, MAX_CHARS_KEY: 800})
    assert len(text) <= 800
    assert "I prefer green tea" in text  # preferences outrank plain facts
    assert "never deploy on Fridays" in text
    assert "fact number 59" in text and "fact number 0 " not in text  # oldest facts go first


async def test_consolidate_from_nothing() -> None:
    text = await ask("consolidate", **{CURRENT_KEY: "", ENTRIES_KEY: ["我喜欢爬山"]})
    assert text == "# Memory\n\n## Preferences\n- 我喜欢爬山\n"


# -- other requests --------------------------------------------------------------------------


async def test_bad_task_metadata_is_a_model_error() -> None:
    with pytest.raises(ModelError, match="unknown task 'translate'"):
        await ask("translate")
    with pytest.raises(ModelError, match=r"memdir\.entries"):
        await ask("consolidate", **{CURRENT_KEY: "", ENTRIES_KEY: "not a list"})
    with pytest.raises(ModelError, match=r"memdir\.messages"):
        await ask("summarize", **{MESSAGES_KEY: [{"role": "robot"}]})
    with pytest.raises(ModelError, match="positive integer"):
        await ask("consolidate", **{CURRENT_KEY: "", ENTRIES_KEY: [], MAX_CHARS_KEY: 0})


async def test_without_marker_it_quotes_the_most_relevant_context() -> None:
    model = ExtractiveModel()
    resp = await model.generate(
        [
            Msg.system("You are helpful."),
            Msg.user("Our staging database lives on db-staging.internal port 5433."),
            Msg.assistant("Understood."),
            Msg.user("Which port does the staging database use?"),
        ]
    )
    assert resp.text == "Our staging database lives on db-staging.internal port 5433."
    empty = await model.generate([Msg.user("zebra quantum")])
    assert "no context matches" in empty.text


async def test_summarize_without_structured_copy_uses_the_conversation() -> None:
    model = ExtractiveModel()
    resp = await model.generate(
        [*CODING_SESSION, Msg.user("Summarise the above.", metadata={TASK_KEY: "summarize"})]
    )
    assert "- tests/test_app.py" in parse_summary(resp.text)["ARTIFACTS"]


# -- invariants ------------------------------------------------------------------------------

words = st.sampled_from(
    [
        "I prefer",
        "we decided",
        "remember that",
        "src/app.py",
        "https://x.org/a",
        "`git log`",
        "我喜欢",
        "决定",
        "记住",
        "截止",
        "ok",
        "?",
        ".",
        "。",
        "\n",
        " ",
        "Error:",
        "#12",
        "next step",
    ]
)
prose = st.lists(words, max_size=12).map(" ".join)


@st.composite
def conversations(draw: st.DrawFn) -> list[Msg]:
    msgs: list[Msg] = []
    for i in range(draw(st.integers(0, 8))):
        kind = draw(st.sampled_from(["user", "assistant", "call", "result", "summary"]))
        if kind == "user":
            msgs.append(Msg.user(draw(prose)))
        elif kind == "assistant":
            msgs.append(Msg.assistant(draw(prose)))
        elif kind == "call":
            args = {draw(st.sampled_from(["path", "command", "q", "run_id"])): draw(prose)}
            msgs.append(Msg.assistant(tool_calls=[ToolUseBlock(id=f"c{i}", name="t", input=args)]))
        elif kind == "result":
            msgs.append(Msg.tool_result(f"c{i - 1}", draw(prose), is_error=draw(st.booleans())))
        else:
            msgs.append(Msg.user("## SESSION INTENT\n- " + draw(prose), name=SUMMARY_NAME))
    return msgs


markdown_lines = st.sampled_from(
    ["# Memory", "## Preferences", "## 偏好", "## Misc", "", "free prose line", "  continued"]
) | st.text(alphabet="ab -#*我喜欢决定\n", max_size=30).map(lambda t: t.replace("\n", " "))
bullets = st.text(alphabet="abcdefgh XYZ0123我喜欢决定记住.-", min_size=1, max_size=40)


@settings(max_examples=150, deadline=None)
@given(st.lists(markdown_lines, max_size=15), st.lists(bullets, max_size=12))
def test_consolidation_keeps_the_newest_entry_and_is_stable(
    current_lines: list[str], entries: list[str]
) -> None:
    current = "\n".join(current_lines)
    out = consolidate(current, entries)
    keys = {normalize_bullet(line) for line in out.splitlines() if line.startswith("- ")}
    real = [e for e in entries if normalize_bullet(e)]
    if real:
        assert normalize_bullet(real[-1]) in keys
    assert consolidate(out, []) == out
    assert consolidate(out, entries) == out


@settings(max_examples=100, deadline=None)
@given(conversations(), st.none() | st.integers(min_value=1, max_value=400))
def test_summary_and_flush_accept_any_conversation(msgs: list[Msg], budget: int | None) -> None:
    text = summarize(msgs, max_chars=budget)
    assert list(parse_summary(text)) == ["SESSION INTENT", "SUMMARY", "ARTIFACTS", "NEXT STEPS"]
    facts = extract_facts(msgs, known="")
    assert facts == NO_REPLY or all(line.startswith("- ") for line in facts.splitlines())
