"""Session logs: full-fidelity offload, idempotency, damage tolerance, concurrency, failures."""

from __future__ import annotations

import errno
import json
import multiprocessing as mp
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memdir.errors import SessionLogError, WorkspaceError
from memdir.messages import ImageBlock, Msg, TextBlock, ThinkingBlock, ToolUseBlock
from memdir.sessions import LogSpan, SessionLog, list_sessions
from memdir.workspace import Workspace


def _conversation() -> list[Msg]:
    big_input = {"path": "notes/plan.md", "content": "第一行\n" + "x" * 20_000, "n": [1, 2.5, None]}
    call = ToolUseBlock(id="call_1", name="write_file", input=big_input)
    return [
        Msg.user("请把迁移计划写到 notes/plan.md"),
        Msg(
            role="assistant",
            content=(
                ThinkingBlock(thinking="The user wants a file.", signature="sig=="),
                TextBlock(text="Writing it now."),
                call,
            ),
        ),
        Msg.tool_result("call_1", "ok: wrote 20,004 bytes\n" + "y" * 30_000, name="write_file"),
        Msg(
            role="user",
            content=(TextBlock(text="and this?"), ImageBlock(source="data:image/png;base64,AAAA")),
            metadata={"channel": "cli", "tags": ["a", "b"]},
        ),
        Msg.assistant("Line separators\u2028and\u2029paragraphs stay inside one record."),
    ]


def test_round_trip_keeps_every_message_in_full(ws: Workspace) -> None:
    log = SessionLog(ws, "s1")
    msgs = _conversation()
    span = log.append(msgs)
    assert span == LogSpan(path="sessions/s1.log.jsonl", start_line=1, end_line=5)
    assert log.messages() == msgs
    assert log.read_span(span) == msgs
    assert log.messages(2, 3) == msgs[1:3]
    records = log.read().records
    assert [r.line for r in records] == [1, 2, 3, 4, 5]
    assert all(r.session == "s1" for r in records)
    assert records[0].offloaded_at == ws.utc_now()
    raw = log.path.read_text(encoding="utf-8")
    assert raw.count("\n") == 5 and raw.endswith("\n")
    assert "请把迁移计划" in raw  # UTF-8, not \\u escapes
    first = json.loads(raw.split("\n")[0])
    assert first["v"] == 1 and first["type"] == "message" and first["session"] == "s1"
    assert first["msg"] == msgs[0].to_dict()


def test_spans_continue_across_appends_and_instances(ws: Workspace) -> None:
    msgs = _conversation()
    assert SessionLog(ws, "s1").append(msgs[:2]) == LogSpan(
        path="sessions/s1.log.jsonl", start_line=1, end_line=2
    )
    other = SessionLog(ws, "s1")
    span = other.append(msgs[2:])
    assert span is not None and (span.start_line, span.end_line) == (3, 5)
    assert other.messages(span.start_line, span.end_line) == msgs[2:]


def test_reoffloading_the_same_ids_appends_nothing(ws: Workspace) -> None:
    log = SessionLog(ws, "s1")
    msgs = _conversation()
    log.append(msgs[:3])
    size = log.path.stat().st_size
    assert log.append(msgs[:3]) is None
    assert SessionLog(ws, "s1").append(msgs[:3]) is None  # a fresh instance reads the ids
    assert log.path.stat().st_size == size
    span = log.append([*msgs, msgs[4]])  # overlapping batch with a repeat inside
    assert span is not None and (span.start_line, span.end_line) == (4, 5)
    assert log.messages() == msgs
    assert log.ids() == {m.id for m in msgs}
    assert log.append([]) is None


def test_id_cache_follows_appends_by_other_writers(ws: Workspace) -> None:
    a, b = SessionLog(ws, "s1"), SessionLog(ws, "s1")
    msgs = _conversation()
    a.append(msgs[:1])
    assert b.append(msgs[:2]) == LogSpan(path=a.rel_path, start_line=2, end_line=2)
    assert a.append(msgs[:3]) == LogSpan(path=a.rel_path, start_line=3, end_line=3)
    assert len(a.messages()) == 3


def test_torn_last_line_is_skipped_and_the_next_append_starts_clean(ws: Workspace) -> None:
    log = SessionLog(ws, "s1")
    msgs = _conversation()
    log.append(msgs[:2])
    with log.path.open("ab") as fh:
        fh.write(b'{"v":1,"type":"message","msg":{"id":"half')  # a crash mid-write
    result = log.read()
    assert [r.msg for r in result.records] == msgs[:2]
    assert result.torn_tail and result.malformed == []
    span = log.append(msgs[2:3])
    # The torn fragment became line 3 (now reported); the new record is line 4.
    assert span == LogSpan(path=log.rel_path, start_line=4, end_line=4)
    result = log.read()
    assert [r.msg for r in result.records] == msgs[:3]
    assert [n for n, _ in result.malformed] == [3]
    assert not result.torn_tail
    assert log.messages(4, 4) == msgs[2:3]


def test_malformed_lines_are_reported_not_fatal(ws: Workspace) -> None:
    log = SessionLog(ws, "s1")
    msgs = _conversation()
    log.append(msgs[:1])
    with log.path.open("ab") as fh:
        fh.write(b"not json at all\n")
        fh.write(b"[1, 2]\n")
        fh.write(b'{"v":2,"type":"message","msg":{}}\n')
        fh.write(b'{"v":1,"type":"message","msg":{"role":"wizard"}}\n')
        fh.write(b"\xff\xfe bad bytes\n")
        fh.write(b"\n")
        fh.write(b'{"v":1,"type":"marker","note":"a future record kind"}\n')
    log.append(msgs[1:2])
    result = log.read()
    assert [r.msg for r in result.records] == msgs[:2]
    lines = dict(result.malformed)
    assert sorted(lines) == [2, 3, 4, 5, 6]
    assert "invalid JSON" in lines[2]
    assert "object" in lines[3]
    assert "version" in lines[4]
    assert "bad message" in lines[5]
    assert "UTF-8" in lines[6]
    assert log.messages(9, 9) == msgs[1:2]


def test_invalid_session_ids_are_rejected(ws: Workspace) -> None:
    for bad in ["", ".hidden", "../x", "a/b", "a b", "x" * 129, "é", "a\x00"]:
        with pytest.raises(SessionLogError, match="invalid session id"):
            SessionLog(ws, bad)
    assert SessionLog(ws, "x" * 128).append([Msg.user("long id")]) is not None
    assert SessionLog(ws, "a.b-c_D9").rel_path == "sessions/a.b-c_D9.log.jsonl"


def test_line_range_arguments_are_checked(ws: Workspace) -> None:
    log = SessionLog(ws, "s1")
    msgs = _conversation()
    log.append(msgs)
    with pytest.raises(SessionLogError):
        log.messages(0, 2)
    with pytest.raises(SessionLogError):
        log.messages(3, 2)
    assert log.messages(5, 99) == msgs[4:]
    assert log.messages(start_line=4) == msgs[3:]
    assert log.messages(end_line=1) == msgs[:1]
    assert SessionLog(ws, "empty").messages() == []
    with pytest.raises(SessionLogError):
        log.read_span(LogSpan(path="sessions/other.log.jsonl", start_line=1, end_line=1))


def test_non_messages_are_refused(ws: Workspace) -> None:
    with pytest.raises(SessionLogError):
        SessionLog(ws, "s1").append([{"role": "user", "content": "hi"}])  # type: ignore[list-item]


def test_redaction_hook_masks_every_text_field(ws: Workspace) -> None:
    secret = "sk-test-0123456789abcdef"

    def mask(text: str) -> str:
        return text.replace(secret, "[REDACTED]")

    call = ToolUseBlock(id="c1", name="http", input={"headers": {"auth": secret}, "n": 3})
    msgs = [
        Msg.user(f"my key is {secret}"),
        Msg(role="assistant", content=(ThinkingBlock(thinking=f"use {secret}"), call)),
        Msg.tool_result("c1", f"echo {secret}"),
        Msg.tool_result("c1", [TextBlock(text=secret), ImageBlock(source="https://x/y.png")]),
    ]
    log = SessionLog(ws, "s1", redact=mask)
    log.append(msgs)
    raw = log.path.read_text(encoding="utf-8")
    assert secret not in raw
    back = log.messages()
    assert [m.id for m in back] == [m.id for m in msgs]
    assert back[1].tool_uses[0].input == {"headers": {"auth": "[REDACTED]"}, "n": 3}
    assert log.append(msgs) is None  # idempotent on ids, redaction or not


def test_list_sessions(ws: Workspace) -> None:
    assert list_sessions(ws) == []
    for sid in ["b", "a", "c.1"]:
        SessionLog(ws, sid).append([Msg.user(sid)])
    (ws.sessions_dir / "notes.txt").write_text("x")
    (ws.sessions_dir / ".hidden.log.jsonl").write_text("")
    assert list_sessions(ws) == ["a", "b", "c.1"]


# -- failures ---------------------------------------------------------------------------------


def test_disk_full_leaves_the_file_unchanged(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = SessionLog(ws, "s1")
    msgs = _conversation()
    log.append(msgs[:2])
    before = log.path.read_bytes()

    def full(fd: int, data: Any) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(SessionLogError, match="nothing was written"):
        log.append(msgs[2:])
    monkeypatch.undo()
    assert log.path.read_bytes() == before
    # The next append works and numbers lines correctly.
    assert log.append(msgs[2:]) == LogSpan(path=log.rel_path, start_line=3, end_line=5)
    assert log.messages() == msgs


def test_a_write_failing_midway_is_truncated_back(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = SessionLog(ws, "s1")
    msgs = _conversation()
    log.append(msgs[:1])
    before = log.path.read_bytes()
    real_write = os.write
    calls = {"n": 0}

    def partial(fd: int, data: Any) -> int:
        calls["n"] += 1
        if calls["n"] == 1:
            return real_write(fd, bytes(data)[:100])  # a short write...
        raise OSError(errno.EIO, "I/O error")  # ...then the device fails

    monkeypatch.setattr(os, "write", partial)
    with pytest.raises(SessionLogError):
        log.append(msgs[1:])
    monkeypatch.undo()
    assert log.path.read_bytes() == before
    assert log.read().malformed == []


def test_failure_on_a_new_log_leaves_no_file(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(fd: int, data: Any) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    log = SessionLog(ws, "fresh")
    with pytest.raises(SessionLogError):
        log.append([Msg.user("hi")])
    monkeypatch.undo()
    assert not log.path.exists()


def test_permission_denied_is_a_session_log_error(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = SessionLog(ws, "s1")
    log.append([Msg.user("one")])
    real_open = os.open

    def denied(path: Any, flags: int, *args: Any, **kw: Any) -> int:
        # The log is opened by name inside its directory (dir_fd), or by its full path.
        if Path(path).name == log.path.name and flags & os.O_WRONLY | flags & os.O_RDWR:
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, flags, *args, **kw)

    monkeypatch.setattr(os, "open", denied)
    with pytest.raises(SessionLogError, match="Permission denied"):
        log.append([Msg.user("two")])
    monkeypatch.undo()
    assert len(log.messages()) == 1


# -- property: any message content round-trips ------------------------------------------------

_text = st.text(max_size=200)
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | _text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
    max_leaves=10,
)


@given(texts=st.lists(_text, min_size=1, max_size=4), args=st.dictionaries(_text, _json))
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_any_content_round_trips(ws: Workspace, texts: list[str], args: dict[str, Any]) -> None:
    msgs = [Msg.user(t) for t in texts]
    msgs.append(Msg.assistant(tool_calls=[ToolUseBlock(id="c", name="f", input=args)]))
    log = SessionLog(ws, "prop-" + msgs[0].id)
    span = log.append(msgs)
    assert span is not None
    assert log.read_span(span) == msgs
    assert log.read().malformed == []


# -- several processes ------------------------------------------------------------------------

WRITERS = 4
ROUNDS = 10


def _writer(root: str, worker: int, barrier: Any) -> None:
    ws = Workspace(root, tz="UTC")
    log = SessionLog(ws, "multi")
    barrier.wait(timeout=60)
    for r in range(ROUNDS):
        own = [
            Msg.user(f"worker {worker} round {r} #{k}", id=f"w{worker}-{r}-{k}") for k in range(3)
        ]
        # Every worker offloads the same shared messages in each round (as processes
        # compacting one conversation would): each must land exactly once.
        shared = [Msg.user(f"shared {r} #{k}", id=f"shared-{r}-{k}") for k in range(2)]
        log.append([*shared, *own], fsync=False)


@pytest.mark.parametrize("store", ["files", "postgres"])
def test_concurrent_appends_lose_and_duplicate_nothing(
    tmp_path: Path, store: str, request: pytest.FixtureRequest
) -> None:
    ctx = mp.get_context("spawn")
    root = str(tmp_path / "ws") if store == "files" else request.getfixturevalue("pg_url")
    Workspace(root, tz="UTC")
    barrier = ctx.Barrier(WRITERS)
    procs = [ctx.Process(target=_writer, args=(root, w, barrier)) for w in range(WRITERS)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=120)
    for proc in procs:
        if proc.is_alive():
            proc.kill()
        assert proc.exitcode == 0
    log = SessionLog(Workspace(root, tz="UTC"), "multi")
    result = log.read()
    assert result.malformed == [] and not result.torn_tail
    ids = [r.msg.id for r in result.records]
    expected = {f"w{w}-{r}-{k}" for w in range(WRITERS) for r in range(ROUNDS) for k in range(3)}
    expected |= {f"shared-{r}-{k}" for r in range(ROUNDS) for k in range(2)}
    assert len(ids) == len(set(ids)) == len(expected)
    assert set(ids) == expected
    assert [r.line for r in result.records] == list(range(1, len(ids) + 1))


def test_big_logs_are_not_reparsed_on_every_append(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    import memdir.sessions as sessions

    log = SessionLog(ws, "big")
    log.append([Msg.user(f"message {i}") for i in range(300)], fsync=False)
    parsed: list[bytes] = []
    real = sessions.record_id

    def spy(raw: bytes) -> str | None:
        parsed.append(raw)
        return real(raw)

    monkeypatch.setattr(sessions, "record_id", spy)
    log.append([Msg.user("one more")], fsync=False)
    assert parsed == []  # its own writes keep the cache current
    SessionLog(ws, "big").append([Msg.user("from elsewhere")], fsync=False)
    parsed.clear()
    log.append([Msg.user("and another")], fsync=False)
    assert len(parsed) == 1  # only the line another writer added
    assert len(log.ids()) == 303


def test_a_complete_last_record_without_newline_counts_as_logged(ws: Workspace) -> None:
    log = SessionLog(ws, "s1")
    msgs = _conversation()
    log.append(msgs[:1])
    log.path.write_bytes(log.path.read_bytes().rstrip(b"\n"))  # e.g. saved by an editor
    result = log.read()
    assert [r.msg for r in result.records] == msgs[:1] and not result.torn_tail
    assert SessionLog(ws, "s1").append(msgs[:1]) is None
    span = SessionLog(ws, "s1").append(msgs[:2])
    assert span == LogSpan(path=log.rel_path, start_line=2, end_line=2)
    assert log.messages() == msgs[:2] and log.read().malformed == []
    assert log.append(msgs[:2]) is None


def test_an_interrupt_during_the_write_leaves_the_file_unchanged(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = SessionLog(ws, "s1")
    msgs = _conversation()
    log.append(msgs[:1])
    before = log.path.read_bytes()
    real_write = os.write

    def interrupted(fd: int, data: Any) -> int:
        real_write(fd, bytes(data)[:50])
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "write", interrupted)
    with pytest.raises(KeyboardInterrupt):
        log.append(msgs[1:])
    monkeypatch.undo()
    assert log.path.read_bytes() == before


def test_appending_while_the_caller_holds_a_session_wide_lock(ws: Workspace) -> None:
    import threading

    done = threading.Event()

    def offload() -> None:
        # An agent holds its own lock on the session for a whole turn and offloads inside it.
        with ws.lock("session-s1"):
            SessionLog(ws, "s1").append([Msg.user("inside the turn")])
        done.set()

    worker = threading.Thread(target=offload, daemon=True)
    worker.start()
    worker.join(timeout=60)
    assert done.is_set(), "append deadlocked on the caller's lock"


def test_a_deeply_nested_line_is_reported_not_fatal(ws: Workspace) -> None:
    log = SessionLog(ws, "s1")
    log.append([Msg.user("before")])
    with log.path.open("ab") as fh:
        fh.write(b"[" * 100_000 + b"\n")
    # The damaged line neither breaks reading nor the next append.
    assert log.append([Msg.user("after")]) is not None
    result = log.read()
    assert [r.msg.text for r in result.records] == ["before", "after"]
    assert [line for line, _ in result.malformed] == [2]


def test_a_lock_failure_is_a_session_log_error(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = SessionLog(ws, "s1")

    def no_locks(name: str) -> Any:
        raise WorkspaceError("cannot create lock file: Read-only file system")

    monkeypatch.setattr(ws, "lock", no_locks)
    with pytest.raises(SessionLogError, match=r"cannot lock session log.*Read-only"):
        log.append([Msg.user("x")])


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda ws: SessionLog("not a workspace", "s1"), "Workspace"),  # type: ignore[arg-type]
        (lambda ws: SessionLog(ws, "s1").append(None), "list of Msg"),  # type: ignore[arg-type]
        (lambda ws: SessionLog(ws, "s1").append(Msg.user("x")), "list of Msg"),  # type: ignore[arg-type]
        (lambda ws: SessionLog(ws, "s1").messages("2"), "start_line"),  # type: ignore[arg-type]
        (lambda ws: SessionLog(ws, "s1").messages(1, 2.5), "end_line"),  # type: ignore[arg-type]
    ],
)
def test_wrong_argument_types_are_session_log_errors(
    ws: Workspace, call: Any, message: str
) -> None:
    with pytest.raises(SessionLogError, match=message):
        call(ws)
