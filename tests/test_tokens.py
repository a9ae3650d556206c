"""Token counting: estimator accuracy and sanity, request accounting, caching, usage anchoring."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memdir.errors import ConfigError
from memdir.messages import ImageBlock, Msg, TextBlock, ThinkingBlock, ToolUseBlock
from memdir.models import ToolSpec, Usage
from memdir.tokens import (
    IMAGE_TOKENS,
    EstimatingCounter,
    ExactCounter,
    TokenCounter,
    UsageAnchor,
    default_counter,
)
from memdir.tokens._tokenizers import FEATURES, PROFILES, load_exact

# A small hand-written sample per category (not benchmark data). Each text is long enough
# for a per-text tolerance to be meaningful.
SAMPLES: dict[str, list[str]] = {
    "english": [
        "Compaction keeps the most recent messages verbatim and replaces everything before "
        "them with a summary. Before the summary is written, the raw messages are appended "
        "to the session log, so nothing the user said is ever lost, and the summary names "
        "the exact line range it replaced.",
        "The maintenance job runs every six hours. It archives daily ledgers older than "
        "ninety days, merges recent ledgers into the curated memory file, and prunes session "
        "logs that nobody has read for half a year. Only one process runs it at a time.",
        "If the provider rejects a request because the context is too long, the agent "
        "compacts the conversation once more and retries the call a single time; a second "
        "failure is reported to the caller with the provider's original error message.",
    ],
    "chinese": [
        "我们讨论了数据库迁移方案，决定先在测试环境验证，然后在周末的维护窗口切换到新的集群。"
        "迁移期间服务只读，预计停机时间不超过二十分钟。",
        "用户偏好使用中文回复，代码注释保持英文。每天早上九点前不要安排会议，"
        "周五下午通常用来整理文档和回顾本周的工作。",
        "上下文压缩会先把旧消息写入会话日志，再调用模型生成摘要。如果摘要失败，"
        "上下文保持不变，不会用错误信息替换原来的对话内容。后台维护任务每六小时运行一次。",
    ],
    "code": [
        "def load_config(path: Path) -> dict[str, Any]:\n"
        '    """Read a TOML config file, falling back to defaults."""\n'
        "    if not path.exists():\n"
        "        return dict(DEFAULTS)\n"
        "    with path.open('rb') as fh:\n"
        "        data = tomllib.load(fh)\n"
        "    merged = {**DEFAULTS, **data.get('memdir', {})}\n"
        "    for key in ('trigger_tokens', 'keep_messages'):\n"
        "        merged[key] = int(merged[key])\n"
        "    return merged\n",
        "class RateLimiter:\n"
        "    def __init__(self, rate: float, burst: int = 10) -> None:\n"
        "        self.rate = rate\n"
        "        self.tokens = float(burst)\n"
        "        self.updated = time.monotonic()\n\n"
        "    def allow(self) -> bool:\n"
        "        now = time.monotonic()\n"
        "        self.tokens = min(self.burst, self.tokens + (now - self.updated) * self.rate)\n"
        "        self.updated = now\n"
        "        if self.tokens >= 1:\n"
        "            self.tokens -= 1\n"
        "            return True\n"
        "        return False\n",
    ],
    "json": [
        json.dumps(
            {
                "name": "memory_search",
                "arguments": {"query": "database migration plan", "max_results": 5},
                "results": [
                    {"path": "memory/2026-10-14.md", "line_number": 12, "score": 7.25},
                    {"path": "MEMORY.md", "line_number": 3, "score": 4.5},
                ],
            },
            ensure_ascii=False,
        ),
        json.dumps(
            {
                "name": "memory_add",
                "arguments": {
                    "text": "用户决定把数据库迁移推迟到下个月，原因是测试环境还没有准备好。",
                    "tags": ["决定", "数据库", "迁移"],
                },
            },
            ensure_ascii=False,
        ),
        json.dumps(
            {
                "id": "call_7f3a9c2e",
                "type": "function",
                "function": {
                    "name": "write_file",
                    "arguments": json.dumps(
                        {"path": "notes/todo.md", "content": "- review the PR\n- 回复邮件\n"},
                        ensure_ascii=False,
                    ),
                },
            },
            ensure_ascii=False,
        ),
    ],
}

EST = EstimatingCounter()
HAS_EXACT = load_exact("o200k_base") is not None


def _rel(est: int, exact: int) -> float:
    return (est - exact) / exact


# -- the text estimator ---------------------------------------------------------------------


def test_empty_text_is_zero_and_any_text_at_least_one() -> None:
    assert EST.count_text("") == 0
    assert EST.count_text(" ") == 1
    assert EST.count_text("a") == 1


def test_chinese_is_not_undercounted_like_chars_over_four() -> None:
    text = SAMPLES["chinese"][0]
    # o200k spends ~0.6 tokens per Chinese character; chars/4 would give 0.25.
    assert EST.count_text(text) >= 0.5 * len(text)
    assert EST.count_text(text) > 2 * math.ceil(len(text) / 4)


@pytest.mark.skipif(not HAS_EXACT, reason="exact tokenizer (memdir[tokens]) not installed")
@pytest.mark.parametrize("category", sorted(SAMPLES))
def test_estimate_close_to_exact_o200k(category: str) -> None:
    exact = ExactCounter("o200k_base")
    errs = [_rel(EST.count_text(t), exact.count_text(t)) for t in SAMPLES[category]]
    assert all(abs(e) <= 0.25 for e in errs), errs
    assert abs(sum(errs) / len(errs)) <= 0.12, errs


@pytest.mark.skipif(not HAS_EXACT, reason="exact tokenizer (memdir[tokens]) not installed")
def test_cl100k_profile_tracks_cl100k() -> None:
    est, exact = EstimatingCounter("cl100k_base"), ExactCounter("cl100k_base")
    for category in ("english", "chinese"):
        for text in SAMPLES[category]:
            assert abs(_rel(est.count_text(text), exact.count_text(text))) <= 0.25


@given(st.text(max_size=300))
@settings(max_examples=200, deadline=None)
def test_estimate_is_never_negative_and_zero_only_for_empty(text: str) -> None:
    n = EST.count_text(text)
    assert n >= 0
    assert (n == 0) == (text == "")


# Joining two texts can merge a run (a word, a digit run...) or add one boundary feature, so
# the estimate of a concatenation differs from the sum by at most every weight once, plus
# one token of rounding per text.
_BOUNDARY = math.ceil(sum(PROFILES["o200k_base"].weights.values())) + 2


@given(st.text(max_size=200), st.text(max_size=200))
@settings(max_examples=200, deadline=None)
def test_estimate_is_additive_up_to_a_boundary_constant(a: str, b: str) -> None:
    joined = EST.count_text(a + b)
    assert abs(joined - (EST.count_text(a) + EST.count_text(b))) <= _BOUNDARY


@given(st.text(min_size=1, max_size=50), st.integers(min_value=2, max_value=20))
@settings(max_examples=100, deadline=None)
def test_repeating_a_text_grows_the_estimate(text: str, times: int) -> None:
    once = EST.count_text(text)
    assert EST.count_text(text * times) >= times * once - times * _BOUNDARY
    assert EST.count_text(text * times) >= once


def test_lone_surrogates_and_control_characters_do_not_break_counting() -> None:
    assert EST.count_text("a\ud800b\x00\x7f") > 0
    if HAS_EXACT:
        assert ExactCounter().count_text("a\ud800b") > 0


def test_profile_rejects_negative_or_unknown_weights() -> None:
    from memdir.tokens._tokenizers import EstimatorProfile

    with pytest.raises(ValueError, match="non-negative"):
        EstimatorProfile(name="x", weights={"letters": -1.0})
    with pytest.raises(ValueError, match="unknown"):
        EstimatorProfile(name="x", weights={"syllables": 1.0})
    assert len(FEATURES) == len(set(FEATURES))


def test_unknown_profile_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="o200k_base"):
        EstimatingCounter("gpt2")


# -- requests ---------------------------------------------------------------------------------


def _conversation(n: int) -> list[Msg]:
    msgs: list[Msg] = []
    for i in range(n):
        if i % 3 == 0:
            msgs.append(Msg.user(f"question {i}: what did we decide about 迁移 {i}?"))
        elif i % 3 == 1:
            call = ToolUseBlock(id=f"c{i}", name="memory_search", input={"query": f"迁移 {i}"})
            msgs.append(Msg.assistant("Let me look.", tool_calls=[call]))
        else:
            msgs.append(Msg.tool_result(f"c{i - 1}", f"memory/2026-11-{i % 28 + 1:02d}.md:3 ok"))
    return msgs


def test_count_request_covers_system_tools_and_reply_priming() -> None:
    msgs = _conversation(6)
    base = EST.count_request(msgs)
    assert base > EST.count_messages(msgs)  # reply priming
    system = "You are a careful assistant. " * 20
    assert EST.count_request(msgs, system=system) >= base + EST.count_text(system)
    tool = ToolSpec(
        name="memory_search",
        description="Search long-term memory and return matching lines with their paths.",
        parameters={
            "type": "object",
            "properties": {"query": {"type": "string"}, "max_results": {"type": "integer"}},
            "required": ["query"],
        },
    )
    schema_tokens = EST.count_text(json.dumps(tool.parameters))
    assert EST.count_request(msgs, tools=[tool]) >= base + schema_tokens
    assert EST.count_request(msgs, tools=[tool, tool]) > EST.count_request(msgs, tools=[tool])


def test_tool_calls_count_name_and_full_arguments() -> None:
    def call(args: dict[str, Any]) -> Msg:
        return Msg.assistant(tool_calls=[ToolUseBlock(id="c1", name="write_file", input=args)])

    small = EST.count_message(call({"path": "a.txt", "content": "hi"}))
    big = EST.count_message(call({"path": "a.txt", "content": "hello world " * 500}))
    assert big - small >= 500
    # Chinese arguments are counted as the characters a provider sees, not as \\uXXXX escapes.
    zh = {"text": "数据库迁移方案" * 40}
    assert EST.count_message(call(zh)) < EST.count_text(json.dumps(zh, ensure_ascii=True))
    assert EST.count_message(call(zh)) >= EST.count_text(json.dumps(zh, ensure_ascii=False))


def test_tool_results_thinking_and_images_are_counted() -> None:
    long_output = "line of output\n" * 300
    result = Msg.tool_result("c1", long_output, name="shell")
    assert EST.count_message(result) >= EST.count_text(long_output)
    thinking = Msg(
        role="assistant",
        content=(ThinkingBlock(thinking="let me reason about this " * 100), TextBlock(text="ok")),
    )
    assert EST.count_message(thinking) > 400
    image = Msg(role="user", content=(ImageBlock(source="https://example.org/cat.png"),))
    assert EST.count_message(image) >= IMAGE_TOKENS
    parts = Msg.tool_result("c2", [TextBlock(text="see"), ImageBlock(source="data:image/png,x")])
    assert EST.count_message(parts) >= IMAGE_TOKENS
    assert EstimatingCounter(image_tokens=85).count_message(image) < 100


def test_count_message_rejects_non_messages() -> None:
    with pytest.raises(ConfigError):
        EST.count_message({"role": "user", "content": "hi"})  # type: ignore[arg-type]


def test_counters_satisfy_the_protocol() -> None:
    assert isinstance(EST, TokenCounter)
    assert isinstance(default_counter(), TokenCounter)
    assert default_counter() is default_counter()


# -- caching ----------------------------------------------------------------------------------


class _SpyCounter(EstimatingCounter):
    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []

    def count_text(self, text: str) -> int:
        self.texts.append(text)
        return super().count_text(text)


def test_long_conversation_recounts_only_new_messages() -> None:
    spy = _SpyCounter()
    msgs = _conversation(1000)
    first = spy.count_messages(msgs)
    spy.texts.clear()
    assert spy.count_messages(msgs) == first
    assert spy.texts == []
    new = Msg.user("and one more thing: 还有一件事")
    assert spy.count_messages([*msgs, new]) == first + spy.count_message(new)
    assert spy.texts == [new.text]


def test_edited_message_with_same_id_is_recounted() -> None:
    spy = _SpyCounter()
    msg = Msg.assistant(
        tool_calls=[ToolUseBlock(id="c1", name="write_file", input={"content": "x" * 4000})]
    )
    before = spy.count_message(msg)
    truncated = msg.with_content(
        [ToolUseBlock(id="c1", name="write_file", input={"content": "x…(truncated)"})]
    )
    assert truncated.id == msg.id
    after = spy.count_message(truncated)
    assert after < before
    assert after == EstimatingCounter(cache_size=0).count_message(truncated)
    # A message rebuilt from JSON (new objects, same content) hits the cache.
    spy.texts.clear()
    assert spy.count_message(Msg.from_dict(truncated.to_dict())) == after
    assert spy.texts == []


def test_cache_is_bounded() -> None:
    counter = EstimatingCounter(cache_size=10)
    for msg in _conversation(50):
        counter.count_message(msg)
    assert len(counter._cache) == 10
    with pytest.raises(ConfigError):
        EstimatingCounter(cache_size=-1)


# -- the exact counter ------------------------------------------------------------------------


def test_exact_counter_missing_extra_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import memdir.tokens as tokens

    monkeypatch.setattr(tokens, "load_exact", lambda encoding: None)
    with pytest.raises(ConfigError, match=r"memdir\[tokens\]"):
        ExactCounter()


@pytest.mark.skipif(not HAS_EXACT, reason="exact tokenizer (memdir[tokens]) not installed")
def test_exact_counter_counts_special_token_text_as_text() -> None:
    exact = ExactCounter()
    assert exact.count_text("") == 0
    assert exact.count_text("<|endoftext|>") > 1
    with pytest.raises(ConfigError):
        ExactCounter("no_such_encoding")


# -- usage anchoring --------------------------------------------------------------------------


def test_anchor_adds_only_the_new_messages_to_reported_usage() -> None:
    anchor = UsageAnchor(EST)
    msgs = _conversation(30)
    estimated = EST.count_request(msgs, system="sys")
    assert anchor.estimate(msgs, system="sys") == estimated
    real = round(estimated * 1.2)
    anchor.record(msgs, system="sys", usage=Usage(input_tokens=real, output_tokens=50))
    assert anchor.anchored
    assert anchor.estimate(msgs, system="sys") == real
    new = [Msg.assistant("done"), Msg.user("thanks, 下一步是什么？")]
    delta = EST.count_messages(new)
    got = anchor.estimate([*msgs, *new], system="sys")
    assert got == real + math.ceil(delta * real / estimated)


def test_anchor_falls_back_to_the_estimate_when_the_prefix_changed() -> None:
    anchor = UsageAnchor(EST)
    msgs = _conversation(30)
    anchor.record(msgs, usage=10_000)
    compacted = [Msg.user("summary of the conversation so far"), *msgs[20:]]
    assert anchor.estimate(compacted) == EST.count_request(compacted)
    edited = [msgs[0].with_content("a different question"), *msgs[1:]]
    assert anchor.estimate(edited) == EST.count_request(edited)
    assert anchor.estimate(msgs, system="new system prompt") == EST.count_request(
        msgs, system="new system prompt"
    )
    tool = ToolSpec(name="t", description="d", parameters={"type": "object"})
    assert anchor.estimate(msgs, tools=[tool]) == EST.count_request(msgs, tools=[tool])
    assert anchor.estimate(msgs[:10]) == EST.count_request(msgs[:10])


def test_anchor_ignores_missing_usage_and_clamps_the_correction() -> None:
    anchor = UsageAnchor(EST, max_ratio=2.0)
    msgs = _conversation(9)
    anchor.record(msgs, usage=Usage(input_tokens=None))
    anchor.record(msgs, usage=0)
    assert not anchor.anchored
    anchor.record(msgs, usage=10**6)  # wildly above the estimate
    new = [Msg.user("x " * 100)]
    assert anchor.estimate([*msgs, *new]) == 10**6 + math.ceil(2.0 * EST.count_messages(new))
    anchor.clear()
    assert anchor.estimate(msgs) == EST.count_request(msgs)
    with pytest.raises(ConfigError):
        UsageAnchor(EST, min_ratio=0)


@pytest.mark.parametrize("counter", [EstimatingCounter(), EstimatingCounter("cl100k_base")])
@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda c: c.count_text(None), "count_text needs a str"),
        (lambda c: c.count_text(b"bytes"), "count_text needs a str"),
        (lambda c: c.count_messages(None), "count_messages takes a list"),
        (lambda c: c.count_messages(Msg.user("one")), "count_messages takes a list"),
        (lambda c: c.count_request([Msg.user("x")], system=5), "system must be a str"),
        (lambda c: c.count_request([Msg.user("x")], tools=[{"name": "f"}]), "ToolSpec"),
    ],
)
def test_wrong_argument_types_are_config_errors(counter: Any, call: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        call(counter)


def test_anchor_rejects_a_counter_that_is_not_one() -> None:
    with pytest.raises(ConfigError, match="TokenCounter"):
        UsageAnchor("o200k_base")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: EstimatingCounter(123), "profile must be"),  # type: ignore[arg-type]
        (lambda: EstimatingCounter(image_tokens="1600"), "image_tokens must be an int"),  # type: ignore[arg-type]
        (lambda: EstimatingCounter(cache_size=-1), "cache_size must be an int"),
        (lambda: UsageAnchor().record([], usage={"input_tokens": 5}), "usage must be a Usage"),  # type: ignore[arg-type]
    ],
)
def test_bad_counter_settings_are_config_errors(make: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        make()
