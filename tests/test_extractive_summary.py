"""The extractive compaction summary: what a developer needs to pick the work up again.

Identifiers, paths and commands survive verbatim and grouped; decisions, constraints, errors
and outcomes become labelled bullets in the conversation's language; the open request and the
assistant's stated plan are the next steps; folding an earlier summary merges it and stays
bounded however often it happens.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from memdir.messages import SUMMARY_NAME, Msg, ToolUseBlock
from memdir.models import MESSAGES_KEY, TASK_KEY, ExtractiveModel
from memdir.models.extractive._extract_summary import parse_summary, summarize


def call(call_id: str, name: str, **args: Any) -> ToolUseBlock:
    return ToolUseBlock(id=call_id, name=name, input=args)


def folded(text: str) -> Msg:
    """An earlier summary as the compactor hands it over."""
    return Msg.user(
        f"[Context note] Compacted.\n\n<summary>\n{text}\n</summary>", name=SUMMARY_NAME
    )


def section(text: str, name: str) -> str:
    return "\n".join(parse_summary(text)[name])


def groups(text: str) -> dict[str, list[str]]:
    """The ARTIFACTS lines under each group heading."""
    out: dict[str, list[str]] = {}
    current = "?"
    for line in parse_summary(text)["ARTIFACTS"]:
        if line.endswith((":", "：")) and not line.startswith("- "):
            current = line.rstrip(":：")
            out[current] = []
        else:
            out.setdefault(current, []).append(line)
    return out


EXPORT_SESSION = [
    Msg.user(
        "The nightly export job crashes since yesterday, see PAY-1432. Please find the cause and "
        "fix it. It reads its connection string from EXPORT_DSN. Never touch the files under "
        "migrations/ without asking me first."
    ),
    Msg.assistant(
        "I'll start by reading the job.",
        tool_calls=[call("c1", "read_file", path="jobs/export_nightly.py")],
    ),
    Msg.tool_result(
        "c1", "import os\nBATCH_SIZE = 500\nDSN = os.environ['EXPORT_DSN']\n", name="read_file"
    ),
    Msg.assistant(tool_calls=[call("c2", "run_command", command="pytest -q tests/test_export.py")]),
    Msg.tool_result(
        "c2",
        "....F\n=================== FAILURES ===================\n"
        "E   ValueError: invalid literal for int() with base 10: 'N/A'\n"
        "jobs/export_nightly.py:88: ValueError\n"
        "============= 1 failed, 4 passed in 0.42s =============",
        name="run_command",
        is_error=True,
    ),
    Msg.assistant(
        "The root cause is the 'N/A' placeholder in the amount column. We decided to treat 'N/A' "
        "as a missing value instead of failing the whole batch.",
        tool_calls=[
            call("c3", "edit_file", path="jobs/export_nightly.py", old="int(v)", new="amount(v)")
        ],
    ),
    Msg.tool_result("c3", "ok", name="edit_file"),
    Msg.assistant(
        tool_calls=[
            call("c4", "query_db", query="SELECT count(*) FROM export_runs WHERE status = 'x'")
        ]
    ),
    Msg.tool_result("c4", "count\n-----\n3", name="query_db"),
    Msg.assistant(tool_calls=[call("c5", "bash", command="git log -1 --format=%H")]),
    Msg.tool_result("c5", "9f2c4e1a7b3d5c6e8f9a0b1c2d3e4f5a6b7c8d9e", name="bash"),
    Msg.assistant(
        "Fixed in commit 9f2c4e1a7b3d5c6e8f9a0b1c2d3e4f5a6b7c8d9e. The dashboard is "
        "https://ops:s3cretpw@grafana.example.com/d/export and the queue is redis.internal:6379. "
        "I'll draft the release notes for v2.4.1 next."
    ),
    Msg.user(
        "Great. Now open a pull request against main and ask dana@example.com to review it. "
        "I prefer small PRs."
    ),
]


def test_an_english_session_keeps_requests_decisions_errors_and_names() -> None:
    text = summarize(EXPORT_SESSION)
    intent = parse_summary(text)["SESSION INTENT"]
    assert intent[0].startswith("- The nightly export job crashes since yesterday, see PAY-1432.")
    assert intent[1].startswith("- Now open a pull request against main")  # new direction

    summary = section(text, "SUMMARY")
    assert "- Constraint: Never touch the files under migrations/ without asking me first." in (
        summary
    )
    assert "- Decision: We decided to treat 'N/A' as a missing value instead of failing" in summary
    assert "- Finding: The root cause is the 'N/A' placeholder in the amount column." in summary
    ran = "run_command `pytest -q tests/test_export.py`"
    assert f"- Error ({ran}): E ValueError: invalid literal for int()" in summary
    assert f"- Result ({ran}): 1 failed, 4 passed in 0.42s" in summary
    assert "- Preference: I prefer small PRs." in summary
    assert "Tools used: read_file ×1, run_command ×1, edit_file ×1, query_db ×1, bash ×1" in summary

    art = groups(text)
    assert list(art) == ["Files", "Commands", "Identifiers", "URLs"]
    assert "- jobs/export_nightly.py (edited)" in art["Files"]  # edited after it was read
    assert "- migrations/" in art["Files"] and "- tests/test_export.py" in art["Files"]
    assert art["Commands"] == [
        "- `pytest -q tests/test_export.py` (failed)",
        "- `git log -1 --format=%H`",
    ]
    for ident in ("PAY-1432", "EXPORT_DSN", "SQL table export_runs", "v2.4.1", "dana@example.com"):
        assert f"- {ident}" in art["Identifiers"]
    assert "- 9f2c4e1a7b3d5c6e8f9a0b1c2d3e4f5a6b7c8d9e" in art["Identifiers"]
    assert not any("BATCH_SIZE" in line for line in art["Identifiers"])  # a constant in output
    assert "- redis.internal:6379" in art["URLs"]
    assert "- https://ops:[REDACTED:url_password]@grafana.example.com/d/export" in art["URLs"]
    assert "s3cretpw" not in text

    steps = parse_summary(text)["NEXT STEPS"]
    assert steps == [
        "- Open user request: Great. Now open a pull request against main and ask "
        "dana@example.com to review it. I prefer small PRs.",
        "- Assistant's plan: I'll draft the release notes for v2.4.1 next.",
    ]


ORDER_SESSION = [
    Msg.user("帮我把订单服务迁移到新的消息队列，需求见 OPS-2291。不要修改 config/prod.yaml。"),
    Msg.assistant(
        "我先看一下消费者代码。",
        tool_calls=[call("z1", "read_file", path="services/order/consumer.go")],
    ),
    Msg.tool_result("z1", "package order", name="read_file"),
    Msg.assistant(tool_calls=[call("z2", "shell", command="go test ./services/order/...")]),
    Msg.tool_result(
        "z2",
        "--- FAIL: TestConsume (0.01s)\n    consumer_test.go:41: 连接被拒绝\nFAIL",
        name="shell",
        is_error=True,
    ),
    Msg.assistant(
        "原因是测试依赖本地的 RabbitMQ。我们决定改用 Kafka，测试里使用内存实现。",
        tool_calls=[call("z3", "write_file", path="services/order/kafka.go", content="package x")],
    ),
    Msg.tool_result("z3", "已写入", name="write_file"),
    Msg.user("好的。接下来把 docs/migration.md 也更新一下，写清楚回滚步骤。"),
]


def test_a_chinese_session_gets_chinese_labels_and_headings() -> None:
    text = summarize(ORDER_SESSION)
    intent = section(text, "SESSION INTENT")
    assert "- 帮我把订单服务迁移到新的消息队列" in intent
    assert "- 接下来把 docs/migration.md 也更新一下" in intent
    summary = section(text, "SUMMARY")
    assert "- 约束：不要修改 config/prod.yaml。" in summary
    assert "- 决定：我们决定改用 Kafka，测试里使用内存实现。" in summary
    assert "- 发现：原因是测试依赖本地的 RabbitMQ。" in summary
    assert "- 错误（shell `go test ./services/order/...`）：FAIL: TestConsume (0.01s)" in summary
    assert "- 使用的工具：" in summary
    art = groups(text)
    assert list(art) == ["文件", "命令", "标识符"]
    assert "- services/order/kafka.go（已修改）" in art["文件"]
    assert "- config/prod.yaml" in art["文件"] and "- docs/migration.md" in art["文件"]
    assert art["命令"] == ["- `go test ./services/order/...`（失败）"]
    assert art["标识符"] == ["- OPS-2291"]
    steps = section(text, "NEXT STEPS")
    assert (
        "- 未完成的用户请求：好的。接下来把 docs/migration.md 也更新一下，写清楚回滚步骤。" in steps
    )


def test_folding_merges_replaces_changed_decisions_and_is_a_fixed_point() -> None:
    first = summarize(EXPORT_SESSION)
    later = [
        folded(first),
        Msg.assistant(
            "Actually, we decided to treat 'N/A' as zero instead of failing the whole batch.",
            tool_calls=[call("d1", "run_command", command="pytest -q tests/test_export.py")],
        ),
        Msg.tool_result("d1", "5 passed in 0.40s", name="run_command"),
        Msg.user(
            "Next, add a regression test for the N/A rows in tests/test_export.py, see PAY-1432."
        ),
    ]
    text = summarize(later)
    summary = section(text, "SUMMARY")
    assert "as zero instead of failing" in summary
    assert "as a missing value" not in summary  # the newer decision replaced it
    assert "Constraint: Never touch the files under migrations/" in summary  # carried over
    assert "- Result (run_command `pytest -q tests/test_export.py`): 5 passed in 0.40s" in summary
    assert "1 failed, 4 passed" not in summary  # the latest run's outcome replaced it
    assert "ValueError" in summary  # what failed stays known
    assert "run_command ×2" in summary and "read_file ×1" in summary  # tallies add up
    art = groups(text)
    assert art["Identifiers"].count("- PAY-1432") == 1
    assert art["Identifiers"][-1] == "- PAY-1432"  # ordered by last mention
    assert art["Files"][-1] == "- tests/test_export.py"
    assert "- `pytest -q tests/test_export.py`" in art["Commands"]  # the latest run passed
    intent = parse_summary(text)["SESSION INTENT"]
    assert intent[0].startswith("- The nightly export job crashes")
    assert intent[-1].startswith("- Next, add a regression test")
    steps = section(text, "NEXT STEPS")
    assert "regression test" in steps and "pull request" not in steps  # superseded
    # Folding a summary with nothing new gives the same summary, byte for byte.
    assert summarize([folded(text)]) == text
    assert summarize(later) == text


def round_of_work(i: int) -> list[Msg]:
    return [
        Msg.user(f"Now handle WEB-{100 + i}: the handler in src/module_{i}.py times out."),
        Msg.assistant(
            f"We decided to use strategy S{i} for module {i}.",
            tool_calls=[call(f"e{i}", "edit_file", path=f"src/module_{i}.py", diff="…")],
        ),
        Msg.tool_result(f"e{i}", "ok", name="edit_file"),
        Msg.assistant(tool_calls=[call(f"r{i}", "bash", command=f"pytest tests/test_m{i}.py")]),
        Msg.tool_result(f"r{i}", f"Error: timeout in test_m{i}\n1 failed in 3.1s", name="bash"),
        Msg.assistant(f"Module {i} is done, see https://ci.example.com/runs/{5000 + i}."),
    ]


def test_repeated_folding_stays_bounded_and_keeps_the_newest() -> None:
    text = ""
    lengths = []
    for i in range(40):
        text = summarize([*([folded(text)] if text else []), *round_of_work(i)])
        lengths.append(len(text))
    assert max(lengths) < 9_000
    assert lengths[-1] <= lengths[19] * 1.1  # no growth once the caps are reached
    art = groups(text)
    assert len(art["Files"]) <= 26 and len(art["Identifiers"]) <= 26  # cap + the count line
    assert art["Files"][0].startswith("- (+") and "more files in the session log" in art["Files"][0]
    assert "- src/module_39.py (edited)" in art["Files"]
    assert "- WEB-139" in art["Identifiers"] and "- WEB-100" not in art["Identifiers"]
    assert "- https://ci.example.com/runs/5039" in art["URLs"]
    summary = parse_summary(text)["SUMMARY"]
    assert summary[0].startswith("- (+") and "earlier points in the session log" in summary[0]
    assert "- Decision: We decided to use strategy S39 for module 39." in summary
    assert "- Decision: We decided to use strategy S10 for module 10." in summary
    # Errors and answers go before decisions when space runs out.
    assert "timeout in test_m10" not in "\n".join(summary)
    intent = parse_summary(text)["SESSION INTENT"]
    assert intent[0].startswith("- Now handle WEB-100") and intent[-1].startswith(
        "- Now handle WEB-139"
    )
    assert intent[2].startswith("- (+")


def test_artifacts_come_from_tool_output_but_not_its_noise() -> None:
    msgs = [
        Msg.user("Please open the PR for the fix."),
        Msg.assistant(tool_calls=[call("g1", "gh", args=["pr", "create", "--fill"])]),
        Msg.tool_result(
            "g1",
            "Creating pull request for fix-export into main\n"
            "https://github.com/acme/shop/pull/512\n"
            "MAX_RETRIES = 3  # quoted source\n`rm -rf /` is what the docs warn about\n",
            name="gh",
        ),
    ]
    art = groups(summarize(msgs))
    assert art["URLs"] == ["- https://github.com/acme/shop/pull/512"]
    assert "Identifiers" not in art and "Commands" not in art


def test_plain_prose_yields_no_artifacts() -> None:
    msgs = [
        Msg.user(
            "Use UTF-8 and/or ASCII, e.g. for Node.js apps. The meeting is at 10:30 on "
            "2026/11/30 and costs 3.5 dollars; build 10 images and read it line by line."
        )
    ]
    assert parse_summary(summarize(msgs))["ARTIFACTS"] == []


def test_small_talk_is_not_a_rule_a_decision_or_a_request() -> None:
    msgs = [
        Msg.user("Please draft the launch email for the beta testers."),
        Msg.assistant("Agreed, Sam! I'm always here to help."),
        Msg.user("2026-11-30"),
        Msg.user("Must have been a long week. Don't worry about the tone."),
        Msg.user("Always ask before sending anything to the list."),
    ]
    text = summarize(msgs)
    assert parse_summary(text)["SESSION INTENT"] == [
        "- Please draft the launch email for the beta testers."
    ]
    assert parse_summary(text)["SUMMARY"] == [
        "- Answered: Agreed, Sam!",
        "- Constraint: Always ask before sending anything to the list.",
    ]


def test_more_identifier_shapes() -> None:
    msgs = [
        Msg.user(
            "The installer C:\\Users\\dana\\setup-2.1.0.exe fails on build 20931. Pin "
            "requests==2.31.0, set ${HOME}/.cache, compare with PR #77 and issue 4411, and run "
            "`docker compose up -d` on localhost:8080 "
            "(request 6f1c2d3e-aaaa-4bbb-8ccc-0123456789ab)."
        )
    ]
    art = groups(summarize(msgs))
    assert "- C:\\Users\\dana\\setup-2.1.0.exe" in art["Files"]
    for ident in ("build 20931", "requests==2.31.0", "HOME", "PR #77", "issue 4411"):
        assert f"- {ident}" in art["Identifiers"]
    assert "- 6f1c2d3e-aaaa-4bbb-8ccc-0123456789ab" in art["Identifiers"]
    assert art["Commands"] == ["- `docker compose up -d`"]
    assert art["URLs"] == ["- localhost:8080"]


def test_a_summary_written_by_a_language_model_is_folded_in() -> None:
    earlier = (
        "## SESSION INTENT\n- Move the billing cron job to the new scheduler.\n\n"
        "## SUMMARY\n- The cron job now runs under the new scheduler.\n\n"
        "## ARTIFACTS\n- file: billing/cron.py\n- src/scheduler/config.py: added the billing "
        "entry\n- Dashboard updated\n\n## NEXT STEPS\n- Report back to the user."
    )
    text = summarize([folded(earlier), Msg.assistant("Checked src/scheduler/config.py again.")])
    art = groups(text)
    assert art["Files"] == [
        "- billing/cron.py",
        "- src/scheduler/config.py: added the billing entry",  # its description is kept
    ]
    assert art["Other"] == ["- Dashboard updated"]
    assert "- The cron job now runs under the new scheduler." in section(text, "SUMMARY")
    assert "- Report back to the user." in section(text, "NEXT STEPS")  # nothing new was asked


async def test_the_model_summarises_within_its_output_budget() -> None:
    model = ExtractiveModel()
    for msgs, tokens, chars_per_token in ((EXPORT_SESSION, 300, 3), (ORDER_SESSION, 400, 1)):
        prompt = Msg.user(
            "(summarise)",
            metadata={TASK_KEY: "summarize", MESSAGES_KEY: [m.to_dict() for m in msgs]},
        )
        text = (await model.generate([prompt], max_output_tokens=tokens)).text
        full = summarize(msgs)
        assert len(text) <= tokens * chars_per_token < len(full)
        assert list(parse_summary(text)) == list(parse_summary(full))
        assert "(+" in text or "另有" in text  # what was dropped is counted


# -- invariants ------------------------------------------------------------------------------

pieces = st.sampled_from(
    [
        "We decided to use Postgres.",
        "Never push to main.",
        "I prefer tabs.",
        "src/app.py",
        "PAY-17",
        "`make test`",
        "https://x.org/a",
        "我们决定采用方案B。",
        "不要删除日志。",
        "ValueError: bad",
        "3 passed",
        "I'll check it.",
        "ok",
        "?",
        "\n",
        "Decision:",
        "- (+3 more files in the session log)",
        "Files:",
    ]
)
prose = st.lists(pieces, max_size=8).map(" ".join)


@st.composite
def conversations(draw: st.DrawFn) -> list[Msg]:
    msgs: list[Msg] = []
    for i in range(draw(st.integers(0, 10))):
        kind = draw(st.sampled_from(["user", "assistant", "call", "result"]))
        if kind == "user":
            msgs.append(Msg.user(draw(prose)))
        elif kind == "assistant":
            msgs.append(Msg.assistant(draw(prose)))
        elif kind == "call":
            key = draw(st.sampled_from(["path", "command", "query", "note"]))
            name = draw(st.sampled_from(["bash", "edit_file", "read_file", "search"]))
            msgs.append(Msg.assistant(tool_calls=[call(f"c{i}", name, **{key: draw(prose)})]))
        else:
            msgs.append(Msg.tool_result(f"c{i - 1}", draw(prose), is_error=draw(st.booleans())))
    return msgs


@settings(max_examples=80, deadline=None)
@given(conversations(), conversations())
def test_folding_is_stable_and_bounded(first: list[Msg], second: list[Msg]) -> None:
    text = summarize(first)
    assert list(parse_summary(text)) == ["SESSION INTENT", "SUMMARY", "ARTIFACTS", "NEXT STEPS"]
    assert summarize([folded(text)]) == text  # nothing new: nothing changes
    again = summarize([folded(text), *second])
    assert summarize([folded(again)]) == again
    assert len(again) < 12_000


def test_results_of_reused_call_ids_are_named_after_their_own_call() -> None:
    # models that number calls per answer send "call_0" every turn
    session = [
        Msg.user("The build is red, please find out why."),
        Msg.assistant(tool_calls=[call("call_0", "run_command", command="make lint")]),
        Msg.tool_result("call_0", "E501 line too long", name="run_command", is_error=True),
        Msg.assistant(tool_calls=[call("call_0", "run_command", command="make test")]),
        Msg.tool_result("call_0", "3 failed, 120 passed", name="run_command"),
    ]
    summary = section(summarize(session), "SUMMARY")
    assert "- Error (run_command `make lint`): E501 line too long" in summary
    assert "- Result (run_command `make test`): 3 failed, 120 passed" in summary
