"""ExtractiveModel flush: which sentences become memories, and how they read.

The examples are written for these tests: ordinary conversation in English and Chinese
(and a little Japanese and Korean), with the facts a person would want remembered mixed
with the chatter they would not.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, date, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memdir.messages import Msg
from memdir.models import KNOWN_KEY, MESSAGES_KEY, NO_REPLY, TASK_KEY, ExtractiveModel
from memdir.models.extractive._extract import near_duplicate
from memdir.models.extractive._extract_dates import resolve_dates
from memdir.models.extractive._extract_memory import consolidate, extract_facts
from memdir.models.extractive._extract_signals import KEEP, fact_score

SAT = datetime(2026, 11, 28, 18, 30, tzinfo=UTC)  # a Saturday
MON = date(2026, 11, 30)  # a Monday


def said(name: str | None, text: str, *, when: datetime = SAT, role: str = "user") -> Msg:
    if role == "assistant":
        return Msg(role="assistant", content=text, name=name, created_at=when)
    return Msg(role="user", content=text, name=name, created_at=when)


async def flush(msgs: list[Msg], known: str = "") -> list[str]:
    prompt = Msg.user(
        "(flush instructions)",
        metadata={TASK_KEY: "flush", MESSAGES_KEY: [m.to_dict() for m in msgs], KNOWN_KEY: known},
    )
    text = (await ExtractiveModel().generate([prompt])).text
    return [] if text == NO_REPLY else text.splitlines()


CHAT = [
    said("Priya", "Hi Tomás! How was your week?"),
    said(
        "Tomás",
        "Busy but good. We adopted a rescue greyhound named Biscuit last Sunday. "
        "She is six years old and already sleeps on the sofa.",
    ),
    said("Priya", "Aww, that's so sweet! Congrats!"),
    said("Priya", "My sister Anjali just started a new job at the Lisbon aquarium."),
    said("Tomás", "Wow, that's amazing. Thanks, Priya!"),
    said("Tomás", "I'm running the Porto half marathon next month, my first race since 2019."),
    said("Priya", "Haha, good luck with that. What time is it there?"),
    said("Priya", "I prefer trail running, honestly."),
    said("Tomás", "lol sure"),
]


async def test_facts_are_kept_with_speaker_and_absolute_dates() -> None:
    bullets = await flush(CHAT)
    assert bullets == [
        "- Tomás: We adopted a rescue greyhound named Biscuit last Sunday (2026-11-22). "
        "She is six years old and already sleeps on the sofa.",
        "- Priya: My sister Anjali just started a new job at the Lisbon aquarium.",
        "- Tomás: I'm running the Porto half marathon next month (2026-12), "
        "my first race since 2019.",
        "- Priya: I prefer trail running, honestly.",
    ]


async def test_chatter_alone_is_no_reply() -> None:
    chatter = [
        said("Priya", "Hey! Good to see you!"),
        said("Tomás", "Thanks, Priya! That's awesome."),
        said("Priya", "Haha, totally. Talk soon!"),
        said("Tomás", "How are you doing?"),
        said(None, "哈哈，太好了！"),
        said(None, "谢谢你，晚安。"),
        said(None, "你最近怎么样？"),
    ]
    assert await flush(chatter) == []


async def test_chinese_facts_and_dates() -> None:
    msgs = [
        said(None, "你好呀！"),
        said(None, "我昨天去医院看了牙医，下周三还要复诊。"),
        said(None, "我的妹妹在深圳的一家银行工作。"),
        said(None, "我们家养了一只猫，名叫年糕，今年三岁了。"),
        said(None, "哈哈哈，真的吗？"),
        said(None, "我喜欢在周末爬山。"),
    ]
    assert await flush(msgs) == [
        "- 用户：我昨天（2026-11-27）去医院看了牙医，下周三（2026-12-02）还要复诊。",
        "- 用户：我的妹妹在深圳的一家银行工作。",
        "- 用户：我们家养了一只猫，名叫年糕，今年（2026）三岁了。",
        "- 用户：我喜欢在周末爬山。",
    ]


async def test_japanese_and_korean_do_not_break_and_keep_numbers() -> None:
    msgs = [
        said("Ken", "昨日、京都で友達と3時間歩きました。"),
        said("Ken", "ありがとう！"),
        said("Min", "저는 2021년에 부산으로 이사했어요."),
        said("Min", "ㅋㅋㅋ"),
    ]
    bullets = await flush(msgs)
    assert bullets == [
        "- Ken：昨日（2026-11-27）、京都で友達と3時間歩きました。",
        "- Min: 저는 2021년에 부산으로 이사했어요.",
    ]


async def test_known_facts_and_repeats_are_dropped() -> None:
    known = (
        "# Memory\n\n## Facts\n- Priya: My sister Anjali just started a new job at the Lisbon "
        "aquarium.\n\n## Memory Flush — 2026-11-28T18:00:00Z\n"
        "- Tomás: I'm running the Porto half marathon next month (2026-12), my first race "
        "since 2019.\n"
    )
    msgs = [
        *CHAT,
        # Says less than what is already known: nothing new.
        said("Tomás", "I'm running the Porto half marathon next month."),
        # The same fact again in the batch.
        said("Priya", "I prefer trail running, honestly!"),
    ]
    assert await flush(msgs, known) == [
        "- Tomás: We adopted a rescue greyhound named Biscuit last Sunday (2026-11-22). "
        "She is six years old and already sleeps on the sofa.",
        "- Priya: I prefer trail running, honestly.",
    ]


async def test_the_same_words_from_two_people_are_two_facts() -> None:
    msgs = [said("Ann", "I moved to Leeds in 2024."), said("Bob", "I moved to Leeds in 2024.")]
    assert await flush(msgs) == [
        "- Ann: I moved to Leeds in 2024.",
        "- Bob: I moved to Leeds in 2024.",
    ]


async def test_questions_secrets_code_and_assistant_chatter_are_not_memories() -> None:
    msgs = [
        said(None, "Did you book the flight to Oslo for March 3?"),
        said(None, "My password for the VPN is Tr0ub4dor&3, I changed it yesterday."),
        said(None, 'Traceback (most recent call last): File "app.py", line 12, in main()'),
        said(None, "I will review the 3 failing tests now.", role="assistant"),
        said(None, "We decided to keep PostgreSQL 16 for the billing service.", role="assistant"),
    ]
    assert await flush(msgs) == [
        "- Assistant: We decided to keep PostgreSQL 16 for the billing service.",
    ]


async def test_remember_requests_keep_their_content_only() -> None:
    msgs = [said(None, "Please remember that the staging database listens on port 5433.")]
    assert await flush(msgs) == ["- User: the staging database listens on port 5433."]


async def test_output_is_deterministic_and_capped_in_conversation_order() -> None:
    many = [
        said("Ivo", f"I visited Museum {n} in Vienna on day {n} of the trip.") for n in range(60)
    ]
    first = await flush(many)
    # Fresh ids give the same answer.
    assert await flush([said(m.name, m.text) for m in many]) == first
    # At most 40 facts per call: equals by score, so the newest, in conversation order.
    days = [int(b.split("day ")[1].split()[0]) for b in first]
    assert days == list(range(20, 60))


async def test_a_long_message_gives_its_best_few_facts() -> None:
    text = " ".join(
        f"I bought {n} new plants for the balcony in Bergen last week." for n in range(2, 9)
    )
    bullets = await flush([said("Lea", text)])
    assert 1 <= len(bullets) <= 3


# -- sentence signals ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sentence",
    [
        "I went to a pottery class yesterday and made a blue bowl.",
        "My brother lives in Glasgow with his two kids.",
        "We're planning to visit Kyoto in April.",
        "Our dog is named Pepper.",
        "I swim at the lido twice a week.",
        "我下个月要去成都出差。",
        "我女儿今年上小学一年级了。",
        "我一般周末会去游泳。",
        "我最近在学做粤菜。",
        "我们家领养了两只小猫。",
    ],
)
def test_facts_reach_the_bar(sentence: str) -> None:
    score = fact_score(sentence, addressees=frozenset({"Anna"}))
    assert score is not None and score >= KEEP


@pytest.mark.parametrize(
    "sentence",
    [
        "That's so cool!",
        "Thanks, Anna!",
        "Wow, Anna, you're amazing.",
        "The colours blend really nicely.",
        "What did you cook last night?",
        "好的，没问题。",
        "哈哈哈",
        "你吃饭了吗",
        "好的，谢谢你的建议，我回头试试。",
        "我现在心情好多了。",
        "今天我有个问题想请教你。",
        "你有空一定要来杭州玩玩。",
        "I have a quick question to ask you today.",
        "I think that movie was really good.",
        "Could you help me rewrite this paragraph?",
        "Please fix the failing test in the parser module.",
    ],
)
def test_chatter_stays_below_the_bar(sentence: str) -> None:
    score = fact_score(sentence, addressees=frozenset({"Anna"}))
    assert score is None or score < KEEP


# -- relative dates --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I saw her yesterday.", "I saw her yesterday (2026-11-29)."),
        ("We met last Friday.", "We met last Friday (2026-11-27)."),
        ("Dinner next Friday?", "Dinner next Friday (2026-12-04)?"),
        ("It opened two days ago.", "It opened two days ago (2026-11-28)."),
        ("I quit 3 years ago.", "I quit 3 years ago (2023)."),
        ("She moved last month.", "She moved last month (2026-10)."),
        ("Busy this weekend.", "Busy this weekend (weekend of 2026-12-05)."),
        ("The review is next week.", "The review is next week (week of 2026-12-07)."),
        ("today's plan", "today's plan"),
        ("我前天买了车。", "我前天（2026-11-28）买了车。"),
        ("上周日我们去了海边。", "上周日（2026-11-29）我们去了海边。"),
        ("两个月后搬家。", "两个月后（2027-01）搬家。"),
        ("去年我在杭州。", "去年（2025）我在杭州。"),
        ("上周很忙。", "上周（2026-11-23起的一周）很忙。"),
        ("来週、大阪に行きます。", "来週（2026-12-07の週）、大阪に行きます。"),
        ("어제 영화를 봤어요.", "어제 (2026-11-29) 영화를 봤어요."),
    ],
)
def test_relative_dates_become_absolute(text: str, expected: str) -> None:
    assert resolve_dates(text, MON) == expected
    assert resolve_dates(expected, MON) == expected  # resolved once only


def test_dates_follow_the_day_each_message_was_written() -> None:
    early = said(
        "Eva", "I started pottery classes yesterday.", when=datetime(2025, 3, 1, tzinfo=UTC)
    )
    late = said("Eva", "I finished my first vase yesterday.", when=datetime(2025, 4, 9, tzinfo=UTC))
    assert extract_facts([early, late], "").splitlines() == [
        "- Eva: I started pottery classes yesterday (2025-02-28).",
        "- Eva: I finished my first vase yesterday (2025-04-08).",
    ]


# -- duplicates and consolidation ------------------------------------------------------------


def test_near_duplicates_respect_speakers_and_events() -> None:
    assert near_duplicate("User prefers dark roast coffee", "User prefers light roast coffee")
    assert not near_duplicate("Ann: I like green tea a lot", "Bob: I like green tea a lot")
    # Two outings are two facts, not an update of one.
    assert not near_duplicate(
        "Ann: I went to the park with my kids on Sunday",
        "Ann: I went to the beach with my kids on Sunday",
    )


def test_consolidation_of_many_conversation_facts_keeps_the_newest_within_budget() -> None:
    entries = [f"Dev: I visited {n} new cafés in Town {n} during week {n}." for n in range(300)]
    entries.append("Dev: I prefer oat milk in my coffee.")
    text = consolidate("", entries, 4000)
    assert len(text) <= 4000
    assert "Town 299 " in text and "Town 0 " not in text
    assert "I prefer oat milk" in text


def test_a_full_file_of_old_preferences_still_takes_new_facts() -> None:
    old = "\n".join(f"- Dev: I prefer tea blend number {n} in winter" for n in range(40))
    current = f"# Memory\n\n## Preferences\n{old}\n"
    budget = len(current) + 10
    text = consolidate(current, ["Dev: I moved to Tromsø on 2026-11-02."], budget)
    assert len(text) <= budget
    assert "I moved to Tromsø" in text
    assert "blend number 0 " not in text and "blend number 39 " in text  # the oldest made room


def test_old_bullets_leave_to_make_room_for_new_ones() -> None:
    old = [f"Kim: I visited Harbour {n} on 2026-10-{n + 1:02d}." for n in range(12)]
    current = "# Memory\n\n## Facts\n" + "".join(f"- {b}\n" for b in old)
    new = [
        f"Kim: I ran the long coastal trail from Harbour {n} to the lighthouse on 2026-11-{n:02d}."
        for n in (20, 21, 22)
    ]
    budget = len(current) + 40
    text = consolidate(current, new, budget)
    kept = [line[2:] for line in text.splitlines() if line.startswith("- ")]
    added = [b for b in new if b in kept]
    removed = [b for b in old if b not in kept]
    assert len(text) <= budget
    assert added == new
    assert len(removed) <= len(added) + len(old) // 4
    assert removed == old[: len(removed)]  # the oldest went
    # A file over budget with nothing new is still trimmed, by priority.
    assert len(consolidate(current, [], len(current) - 50)) <= len(current) - 50


# -- invariants ------------------------------------------------------------------------------

pieces = st.sampled_from(
    [
        "I",
        "we",
        "my sister",
        "went to",
        "Paris",
        "yesterday",
        "last week",
        "3 days ago",
        "昨天",
        "我",
        "去了",
        "上周三",
        "十天前",
        "哈哈",
        "thanks",
        "?",
        "!",
        ".",
        "。",
        "Anna,",
        "2024",
        "password",
        "`x = 1`",
        "\n",
    ]
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(["Ann", "Bo", None]), st.lists(pieces, max_size=14))),
    st.dates(min_value=date(1, 1, 8), max_value=date(9999, 12, 20)).map(
        lambda d: datetime(d.year, d.month, d.day, 12, tzinfo=UTC)
    ),
)
def test_flush_never_fails_and_never_repeats(
    turns: list[tuple[str | None, list[str]]], when: datetime
) -> None:
    msgs = [said(name, " ".join(words), when=when) for name, words in turns]
    text = extract_facts(msgs, known="")
    if text == NO_REPLY:
        return
    lines = text.splitlines()
    assert all(line.startswith("- ") and "password" not in line for line in lines)
    assert len(lines) == len(set(lines))
    assert extract_facts(msgs, known=text) == NO_REPLY  # what was said is now known


def test_a_greeting_before_a_self_introduction_does_not_hide_it() -> None:
    kept = extract_facts([Msg.user("你好，我是林晓雯，负责数据平台。")], "")
    assert "林晓雯" in kept and "数据平台" in kept
    assert extract_facts([Msg.user("谢谢，我明天再试试。")], "") == NO_REPLY
    assert extract_facts([Msg.user("你好呀，好久不见！")], "") == NO_REPLY


async def test_a_loop_of_flushes_can_be_cancelled() -> None:
    calls = 0

    async def flush_forever() -> None:
        nonlocal calls
        for _ in range(200):
            await asyncio.wait_for(flush(CHAT), timeout=600)
            calls += 1

    task = asyncio.create_task(flush_forever())
    await asyncio.sleep(0)  # let the loop start its first call
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert calls < 200


def test_an_entry_over_the_budget_is_clipped_not_dropped() -> None:
    out = consolidate("# Memory\n", ["word " * 12_000, "Jing prefers tabs over spaces"], 4_000)
    assert "- Jing prefers tabs over spaces" in out
    assert "- word word" in out and "…" in out
    assert len(out) <= 4_000


def test_the_extractive_models_own_replies_are_never_facts() -> None:
    reply = "(extractive model: no context matches 'We decided to use pgloader on 2026-12-01.')"
    assert extract_facts([Msg.user("Hello"), Msg.assistant(reply)], "") == NO_REPLY


@pytest.mark.parametrize(
    ("user", "assistant"),
    [
        ("我们决定下周一用 pgloader 迁移数据库。", "Decision: 我们决定下周一用 pgloader 迁移。"),
        ("We decided to migrate with pgloader.", "Decision: we decided to migrate with pgloader."),
    ],
)
def test_an_assistant_restating_a_fact_does_not_save_it_again(user: str, assistant: str) -> None:
    first = extract_facts([said(None, user)], "")
    assert first != NO_REPLY
    assert extract_facts([said(None, assistant, role="assistant")], first) == NO_REPLY
    both = extract_facts([said(None, user), said(None, assistant, role="assistant")], "")
    assert both == first
    # Two people saying the same thing are still two facts.
    again = extract_facts([said("Ann", user), said("Bob", user)], "")
    assert len(again.splitlines()) == 2


@pytest.mark.parametrize(
    "entry",
    ["Decision: we use pgloader.", "We'll use pgloader for the move.", "We all agreed: tabs."],
)
def test_english_decisions_are_filed_under_decisions(entry: str) -> None:
    out = consolidate("# Memory\n", [entry], 4_000)
    assert out == f"# Memory\n\n## Decisions\n- {entry}\n"


@pytest.mark.parametrize(
    "rule",
    [
        "From now on, answer in German please.",
        "Always format dates as month-day-year when I ask about deadlines.",
        "Never push directly to main.",
        "以后回答都用中文。",
        "每次提交前先跑一遍测试。",
    ],
)
def test_a_standing_rule_is_kept_and_filed_with_the_preferences(rule: str) -> None:
    kept = extract_facts([said(None, rule), said(None, "Okay.", role="assistant")], "")
    speaker = "用户：" if rule[0] >= "\u4e00" else "User: "
    assert kept.splitlines() == [f"- {speaker}{rule}"]
    out = consolidate("# Memory\n", [kept.removeprefix("- ")], 4_000)
    assert out.startswith("# Memory\n\n## Preferences\n- ")


def test_an_assistant_saying_always_sets_no_rule() -> None:
    said_by_assistant = said(None, "Always happy to help!", role="assistant")
    assert extract_facts([said(None, "Thanks!"), said_by_assistant], "") == NO_REPLY


def test_the_users_own_sections_keep_their_place() -> None:
    current = "# Memory\n\n## About Jing\n- Jing lives in Lyon\n\n## Facts\n- The NAS is 8 TB\n"
    out = consolidate(current, ["Jing prefers tabs over spaces", "The printer is upstairs"])
    headers = [ln for ln in out.splitlines() if ln.startswith("## ")]
    assert headers == ["## About Jing", "## Preferences", "## Facts"]


def test_a_long_conversation_compares_each_fact_with_few_others(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import memdir.models.extractive._extract_memory as em

    calls = 0
    real = em._repeats

    def counted(new: em._Fact, old: em._Fact) -> bool:
        nonlocal calls
        calls += 1
        return real(new, old)

    monkeypatch.setattr(em, "_repeats", counted)
    msgs = [
        said(
            "Priya",
            f"I moved the server{i} backup to rack{i} in room{i % 7} on 2026-03-0{i % 9 + 1}.",
        )
        for i in range(600)
    ]
    out = extract_facts(msgs, "")
    assert len(out.splitlines()) == 40
    # Before the word index, each of the 600 facts was compared with every earlier one.
    assert calls < 10 * len(msgs)


_WORDS = ["tea", "coffee", "Lyon", "Paris", "2026", "likes", "moved", "works", "I", "we"]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["User", "Ann", "用户"]),
            st.lists(
                st.sampled_from(
                    ["tea", "coffee", "Lyon", "Paris", "2026", "likes", "moved", "works", "I", "we"]
                ),
                min_size=1,
                max_size=8,
            ),
            st.booleans(),
        ),
        max_size=25,
    )
)
def test_the_word_index_finds_exactly_the_repeats(
    rows: list[tuple[str, list[str], bool]],
) -> None:
    from memdir.models.extractive._extract import split_label, tokens
    from memdir.models.extractive._extract_memory import _core, _Fact, _repeats, _Seen
    from memdir.store.ledger import normalize_bullet

    seen, brute = _Seen(), []
    for speaker, words, assistant in rows:
        text = f"{speaker}: {' '.join(words)}"
        label, body = split_label(normalize_bullet(text))
        fact = _Fact(text, 1.0, 0, label, frozenset(tokens(body)), _core(body), assistant)
        assert seen.repeated(fact) == any(_repeats(fact, old) for old in brute)
        seen.add(fact)
        brute.append(fact)


@pytest.mark.parametrize(
    ("text", "whole"),
    [
        (
            "Leave the flaky upload test alone, Marco Silva is rewriting that suite; "
            "file ticket OPS-77 for him.",
            "Marco Silva is rewriting that suite; file ticket OPS-77 for him.",
        ),
        ("我下周三去杭州出差；住在西湖边的酒店，订单号是 H-2291。", "住在西湖边的酒店"),
    ],
)
def test_clauses_after_a_semicolon_stay_with_their_sentence(text: str, whole: str) -> None:
    bullets = asyncio.run(flush([said(None, text)]))
    assert len(bullets) == 1
    assert whole in bullets[0]


@pytest.mark.parametrize(
    ("fact", "chatter"),
    [
        ("Our on-call rotation switches to Keiko Tanaka on 2026-12-07.", "Thanks, Keiko!"),
        (
            "Our firewall changes need sign-off from Keiko Tanaka before they ship.",
            "Let's stop here for today (2026-11-28).",
        ),
        ("I moved the nightly backups to the Oslo data centre in May.", "Talk later, Sven."),
        ("我们决定把备份迁移到深圳机房，下个月十五号切换。", "好的，今天就到这里，谢谢！"),
    ],
)
def test_closing_chatter_does_not_join_a_fact(fact: str, chatter: str) -> None:
    bullets = asyncio.run(flush([said(None, f"{fact} {chatter}")]))
    assert bullets
    # Neither joined to the fact nor a memory of its own.
    assert all(chatter.split(",")[0].split("，")[0] not in b for b in bullets)
    assert fact[:12] in bullets[0]
