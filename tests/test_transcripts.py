from __future__ import annotations

import json
from pathlib import Path

import pytest

from memdir.errors import MemdirError
from memdir.ingest.transcripts import load_transcript, session_id_for
from memdir.messages import Msg, ToolUseBlock

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "transcripts"


def test_openai_sample_with_tool_calls() -> None:
    t = load_transcript(EXAMPLES / "billing-migration.openai.json")
    assert t.format == "openai"
    assert t.session_id == "billing-migration"
    roles = [m.role for m in t.messages]
    assert roles[0] == "system" and "tool" in roles
    parallel = [m for m in t.messages if len(m.tool_uses) == 2]
    assert len(parallel) == 1
    results = {r.tool_use_id for m in t.messages for r in m.tool_results}
    assert {"call_w1", "call_t1", "call_schema_1"} <= results


def test_chinese_openai_sample() -> None:
    t = load_transcript(EXAMPLES / "log-migration-zh.openai.json")
    assert t.format == "openai"
    assert any("数据库迁移" in m.text for m in t.messages)


def _claude_code_lines() -> list[dict[str, object]]:
    base = {"sessionId": "3f2a-Session", "cwd": "/repo", "version": "1.0.0"}
    return [
        {"type": "summary", "summary": "Earlier work", "leafUuid": "x"},
        {
            **base,
            "type": "user",
            "uuid": "u1",
            "timestamp": "2026-03-02T10:00:00Z",
            "message": {"role": "user", "content": "Run the tests please"},
        },
        {
            **base,
            "type": "assistant",
            "uuid": "a1",
            "timestamp": "2026-03-02T10:00:05Z",
            "message": {
                "id": "msg_1",
                "role": "assistant",
                "content": [{"type": "text", "text": "Running them."}],
            },
        },
        {
            **base,
            "type": "assistant",
            "uuid": "a2",
            "timestamp": "2026-03-02T10:00:06Z",
            "message": {
                "id": "msg_1",
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "Bash",
                        "input": {"command": "pytest -q"},
                    }
                ],
            },
        },
        {
            **base,
            "type": "user",
            "uuid": "u2",
            "timestamp": "2026-03-02T10:00:09Z",
            "message": {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "3 passed"}
                ],
            },
        },
        {
            **base,
            "type": "user",
            "isSidechain": True,
            "uuid": "s1",
            "message": {"role": "user", "content": "subagent chatter"},
        },
        {
            **base,
            "type": "user",
            "isMeta": True,
            "uuid": "m1",
            "message": {"role": "user", "content": "<command-name>/clear</command-name>"},
        },
        {
            **base,
            "type": "assistant",
            "uuid": "a3",
            "timestamp": "2026-03-02T10:00:12Z",
            "message": {
                "id": "msg_2",
                "role": "assistant",
                "content": [{"type": "text", "text": "All 3 tests pass."}],
            },
        },
    ]


def test_claude_code_session(tmp_path: Path) -> None:
    path = tmp_path / "3f2a.jsonl"
    path.write_text(
        "\n".join(json.dumps(line) for line in _claude_code_lines()) + "\n{torn", encoding="utf-8"
    )
    t = load_transcript(path)
    assert t.format == "claude-code"
    assert t.session_id == "3f2a-Session"
    assert [m.role for m in t.messages] == ["user", "assistant", "tool", "assistant"]
    merged = t.messages[1]
    assert merged.text == "Running them."
    assert merged.tool_uses == (
        ToolUseBlock(id="toolu_1", name="Bash", input={"command": "pytest -q"}),
    )
    result = t.messages[2].tool_results[0]
    assert result.name == "Bash" and result.text == "3 passed"
    assert t.messages[0].created_at.isoformat() == "2026-03-02T10:00:00+00:00"
    assert not any("subagent" in m.text or "/clear" in m.text for m in t.messages)
    assert t.skipped == 1  # the torn last line


def test_memdir_jsonl_records_and_bare_dicts(tmp_path: Path) -> None:
    msgs = [Msg.user("hello"), Msg.assistant("hi there")]
    path = tmp_path / "s1.log.jsonl"
    lines = [json.dumps({"v": 1, "type": "message", "msg": m.to_dict()}) for m in msgs]
    lines.append(json.dumps(msgs[0].to_dict()))  # duplicate id: read once
    lines.append("not json")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    t = load_transcript(path)
    assert t.format == "memdir"
    assert t.session_id == "s1"
    assert [m.id for m in t.messages] == [m.id for m in msgs]
    assert t.skipped == 1


def test_anthropic_request_document(tmp_path: Path) -> None:
    path = tmp_path / "req.json"
    path.write_text(
        json.dumps(
            {
                "system": "be brief",
                "messages": [
                    {"role": "user", "content": "what is 2+2"},
                    {"role": "assistant", "content": [{"type": "text", "text": "4"}]},
                ],
            }
        ),
        encoding="utf-8",
    )
    t = load_transcript(path)
    assert t.format == "anthropic"
    assert [m.role for m in t.messages] == ["system", "user", "assistant"]


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ("", "empty"),
        ("{}", "messages"),
        ("[]", "no messages"),
        ('[{"role": "wizard", "content": "x"}]', "wizard"),
        ("garbage\nmore garbage\n", "no messages"),
    ],
)
def test_bad_transcripts_give_clear_errors(tmp_path: Path, content: str, match: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(MemdirError, match=match):
        load_transcript(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(MemdirError, match="not found"):
        load_transcript(tmp_path / "nope.json")


def test_session_id_for() -> None:
    assert session_id_for("日志 迁移.openai") == "openai"
    assert session_id_for("..hidden") == "hidden"
    assert session_id_for("!!!") == "session"
    assert len(session_id_for("a" * 300)) == 128


def test_a_line_separator_inside_a_jsonl_message_does_not_split_it(tmp_path: Path) -> None:
    # json.dumps(ensure_ascii=False) leaves U+2028/U+2029 raw; they are not line ends in JSONL.
    msgs = [Msg.user("first\u2028second\u2029third"), Msg.assistant("ok\x85done")]
    path = tmp_path / "s1.log.jsonl"
    lines = [json.dumps({"v": 1, "type": "message", "msg": msgs[0].to_dict()}, ensure_ascii=False)]
    lines += [json.dumps(msgs[1].to_dict(), ensure_ascii=False)]
    path.write_text("\r\n".join(lines) + "\r\n", encoding="utf-8")
    t = load_transcript(path)
    assert [m.text for m in t.messages] == [m.text for m in msgs]
    assert t.skipped == 0


def test_a_byte_order_mark_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "chat.json"
    wire = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(wire).encode("utf-8"))
    t = load_transcript(path)
    assert t.format == "openai"
    assert [m.text for m in t.messages] == ["hi", "hello"]


def test_a_path_of_the_wrong_type_is_a_memdir_error() -> None:
    with pytest.raises(MemdirError, match="transcript path must be"):
        load_transcript(None)  # type: ignore[arg-type]


def test_a_directory_is_a_memdir_error(tmp_path: Path) -> None:
    with pytest.raises(MemdirError, match="cannot read transcript"):
        load_transcript(tmp_path)


def test_a_non_string_claude_code_session_id_falls_back_to_the_file_name(tmp_path: Path) -> None:
    path = tmp_path / "abc.jsonl"
    event = {
        "type": "user",
        "sessionId": 42,
        "message": {"role": "user", "content": "hello"},
        "timestamp": "2026-11-30T09:00:00Z",
    }
    path.write_text(json.dumps(event) + "\n", encoding="utf-8")
    t = load_transcript(path)
    assert t.format == "claude-code"
    assert t.session_id == "abc"


def test_a_single_pretty_printed_message_is_read(tmp_path: Path) -> None:
    path = tmp_path / "one.json"
    path.write_text(json.dumps(Msg.user("只有一条").to_dict(), indent=2), encoding="utf-8")
    t = load_transcript(path)
    assert [m.text for m in t.messages] == ["只有一条"]


def test_session_id_for_refuses_non_text() -> None:
    with pytest.raises(MemdirError, match="needs a str"):
        session_id_for(None)  # type: ignore[arg-type]


def test_claude_code_blocks_memdir_cannot_hold_are_skipped_not_fatal(tmp_path: Path) -> None:
    events = [
        {
            "type": "user",
            "message": {
                "role": "user",
                "content": [
                    {"type": "text", "text": "summarise the attached spec"},
                    {"type": "document", "source": {"type": "base64", "data": "JVBE"}},
                ],
            },
        },
        {
            "type": "assistant",
            "message": {
                "id": "msg_1",
                "role": "assistant",
                "content": [
                    {"type": "server_tool_use", "id": "srv_1", "name": "web_search"},
                    {"type": "text", "text": "The spec asks for idempotent appends."},
                ],
            },
        },
    ]
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(json.dumps(e) for e in events) + "\n", encoding="utf-8")
    t = load_transcript(path)
    assert [m.text for m in t.messages] == [
        "summarise the attached spec",
        "The spec asks for idempotent appends.",
    ]
    assert t.skipped == 2
