"""``memdir.ingest``: transcripts replayed into ledgers, MEMORY.md, session logs and the index."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memdir.compaction import CompactionConfig
from memdir.errors import ConfigError, ModelError
from memdir.index import MemoryIndex
from memdir.ingest import expand_paths, ingest
from memdir.ingest.transcripts import load_transcript
from memdir.messages import SUMMARY_NAME, Msg, msgs_to_json
from memdir.models import ExtractiveModel
from memdir.sessions import SessionLog
from memdir.testing import FunctionModel, ModelCall
from memdir.tools._core import close_shared_indexes
from memdir.workspace import Workspace

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "transcripts"
BILLING = EXAMPLES / "billing-migration.openai.json"
CHINESE = EXAMPLES / "log-migration-zh.openai.json"
CLAUDE = EXAMPLES / "coupon-api.claude-code.jsonl"
SMALL = CompactionConfig(trigger_messages=8, keep_messages=4)


@pytest.fixture(autouse=True)
def _close_indexes() -> Iterator[None]:
    yield
    close_shared_indexes()


def _logged(ws: Workspace, session_id: str) -> list[Msg]:
    return [m for m in SessionLog(ws, session_id).messages() if m.name != SUMMARY_NAME]


def _search(ws: Workspace, query: str) -> list[str]:
    with MemoryIndex(ws) as index:
        return [f"{hit.path}: {hit.content}" for hit in index.search(query, limit=10)]


def _all_bytes(ws: Workspace) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(ws.root.rglob("*")) if p.is_file())


def _snapshot(ws: Workspace) -> dict[str, bytes]:
    """Every file a user would care about (not the derived index, locks and leases)."""
    return {
        str(p.relative_to(ws.root)): p.read_bytes()
        for p in sorted(ws.root.rglob("*"))
        if p.is_file() and ".index" not in p.parts and not p.name.endswith(".lease")
    }


def _huge_transcript(path: Path, *, size: int = 200_000) -> str:
    """An OpenAI-format conversation with one ``size``-character tool result; returns its tail."""
    tail = "FATAL: quota exceeded on volume /srv/invoices (node-7)"
    body = "".join(
        f"2026-11-29T10:{i % 60:02d}:00Z INFO export batch {i} ok\n" for i in range(8000)
    )
    output = (body[: size - len(tail) - 1] + "\n" + tail)[:size]
    assert len(output) == size
    path.write_text(
        json.dumps(
            [
                {"role": "user", "content": "Please remember that the export job runs at 02:00."},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_big",
                            # The live agent never evicts its own read_file; a transcript's
                            # read_file is someone else's tool and is evicted like any other.
                            "type": "function",
                            "function": {"name": "read_file", "arguments": '{"path": "x.log"}'},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "call_big", "content": output},
                {"role": "assistant", "content": "The export failed: the volume is full."},
            ]
        ),
        encoding="utf-8",
    )
    return tail


async def test_openai_transcript_becomes_memory(ws: Workspace) -> None:
    report = await ingest([BILLING], workspace=ws, compaction=SMALL)
    assert report.ok and len(report.sessions) == 1
    session = report.sessions[0]
    assert (session.session_id, session.format, session.messages) == (
        "billing-migration",
        "openai",
        15,
    )
    assert session.compactions >= 1 and session.bullets
    # No timestamps in an OpenAI list: the facts are today's.
    assert session.ledgers == ("memory/2026-11-30.md",)
    ledger = ws.read_text("memory/2026-11-30.md")
    for bullet in session.bullets:
        assert f"- {bullet}" in ledger
    assert "## Memory Flush — 2026-11-30T09:00:00Z" in ledger
    # Every message in the session log, once, in the conversation's order.
    logged = _logged(ws, "billing-migration")
    assert session.logged == 15
    assert [m.text for m in logged] == [
        m.text.replace("Tr0ub4dor-88", "[REDACTED:url_password]")
        for m in load_transcript(BILLING).messages
    ]
    assert len({m.id for m in logged}) == 15
    # MEMORY.md holds the new facts; search finds them in the ledger and in MEMORY.md.
    assert "pytest" in ws.read_text("MEMORY.md")
    assert report.consolidation is not None and report.consolidation.applied
    assert report.memory_chars == len(ws.read_text("MEMORY.md"))
    hits = _search(ws, "pytest type hints")
    assert hits and "pytest" in hits[0]


async def test_secrets_never_reach_a_file(ws: Workspace) -> None:
    await ingest([BILLING], workspace=ws, compaction=SMALL)
    everything = _all_bytes(ws)
    assert b"Tr0ub4dor" not in everything
    assert (
        b"[REDACTED:url_password]" in (ws.sessions_dir / "billing-migration.log.jsonl").read_bytes()
    )


async def test_model_sees_masked_text_only(ws: Workspace) -> None:
    extractive = ExtractiveModel()
    seen: list[str] = []

    async def spy(call: ModelCall) -> Msg:
        seen.append(json.dumps([m.to_dict() for m in call.messages], ensure_ascii=False))
        response = await extractive.generate(call.messages, system=call.system)
        return response.message

    await ingest([BILLING], workspace=ws, model=FunctionModel(spy), compaction=SMALL)
    assert seen and not any("Tr0ub4dor" in request for request in seen)


async def test_claude_code_facts_land_on_the_day_they_were_said(ws: Workspace) -> None:
    report = await ingest([CLAUDE], workspace=ws, compaction=SMALL)
    session = report.sessions[0]
    assert session.format == "claude-code"
    assert session.session_id == "5b1e0c2a-9f4d-4c7e-8a36-2f0d7c1b9e44"
    assert session.ledgers == ("memory/2026-11-26.md", "memory/2026-11-27.md")
    first, second = ws.read_text("memory/2026-11-26.md"), ws.read_text("memory/2026-11-27.md")
    assert "Wang Lei" in first and "## Memory Flush — 2026-11-26T" in first
    assert "one migration per PR" in second and "## Memory Flush — 2026-11-27T" in second
    assert "Wang Lei" not in second
    assert not (ws.memory_dir / "2026-11-30.md").exists()
    assert len(_logged(ws, session.session_id)) == session.messages == 20
    hits = _search(ws, "Wang Lei migration approve")
    assert hits and hits[0].startswith(("memory/2026-11-26.md", "MEMORY.md"))


async def test_a_200_kb_tool_result_is_evicted(ws: Workspace, tmp_path: Path) -> None:
    source = tmp_path / "export.json"
    tail = _huge_transcript(source)
    report = await ingest([source], workspace=ws)
    assert report.sessions[0].evicted == 1 and report.evicted == 1
    files = list((ws.root / "large_tool_results" / "export").glob("call_big-*.txt"))
    assert len(files) == 1
    stored = files[0].read_text(encoding="utf-8")
    assert len(stored) == 200_000 and stored.endswith(tail)
    log = ws.sessions_dir / "export.log.jsonl"
    assert log.stat().st_size < 30_000  # the placeholder, not the output
    result = next(m for m in _logged(ws, "export") if m.role == "tool").tool_results[0]
    assert files[0].name in result.text and tail in result.text


def _anthropic_source(tmp_path: Path) -> Path:
    source = tmp_path / "deploy.anthropic.json"
    calendar = {"type": "tool_use", "id": "tu_1", "name": "calendar", "input": {}}
    result = {"type": "tool_result", "tool_use_id": "tu_1", "content": "Tue free"}
    request = {
        "system": "You are a release assistant.",
        "messages": [
            {"role": "user", "content": "Remember that releases go out on Tuesdays."},
            {"role": "assistant", "content": [{"type": "text", "text": "Checking."}, calendar]},
            {"role": "user", "content": [result]},
            {"role": "assistant", "content": [{"type": "text", "text": "Tuesday it is."}]},
        ],
    }
    source.write_text(json.dumps(request), encoding="utf-8")
    return source


def _memdir_source(tmp_path: Path) -> Path:
    start = datetime(2026, 10, 3, 8, 30, tzinfo=UTC)
    msgs = [
        Msg(role="user", content="I prefer short standups, 10 minutes at most.", created_at=start),
        Msg(role="assistant", content="Noted.", created_at=start + timedelta(seconds=20)),
    ]
    source = tmp_path / "standup.log.jsonl"
    source.write_text("\n".join(json.dumps(m.to_dict()) for m in msgs) + "\n", encoding="utf-8")
    return source


# format -> (source, ledger the fact goes to, a word of the fact)
FORMATS = {
    "openai": lambda tmp: (BILLING, "memory/2026-11-30.md", "pytest"),
    "openai-chinese": lambda tmp: (CHINESE, "memory/2026-11-30.md", "林晓雯"),
    "claude-code": lambda tmp: (CLAUDE, "memory/2026-11-26.md", "Wang Lei"),
    "anthropic": lambda tmp: (_anthropic_source(tmp), "memory/2026-11-30.md", "Tuesdays"),
    "memdir": lambda tmp: (_memdir_source(tmp), "memory/2026-10-03.md", "standups"),
}


@pytest.mark.parametrize("kind", sorted(FORMATS))
async def test_every_format_end_to_end(ws: Workspace, tmp_path: Path, kind: str) -> None:
    source, ledger, word = FORMATS[kind](tmp_path)
    report = await ingest([source], workspace=ws)
    session = report.sessions[0]
    # The fact is in the ledger of its day, in MEMORY.md, and found by search.
    assert ledger in session.ledgers and word in ws.read_text(ledger)
    assert word in ws.read_text("MEMORY.md")
    assert any(word in hit for hit in _search(ws, word))
    # The session log holds every message of the transcript once, in order.
    logged = _logged(ws, session.session_id)
    original = load_transcript(source).messages
    assert [m.role for m in logged] == [m.role for m in original]
    assert len({m.id for m in logged}) == len(original) == session.logged
    # Once is enough.
    again = (await ingest([source], workspace=ws)).sessions[0]
    assert again.already_ingested and not again.bullets and again.logged == 0


async def test_anthropic_request(ws: Workspace, tmp_path: Path) -> None:
    report = await ingest([_anthropic_source(tmp_path)], workspace=ws)
    session = report.sessions[0]
    assert (session.format, session.session_id) == ("anthropic", "deploy")
    roles = [m.role for m in _logged(ws, "deploy")]
    assert roles == ["system", "user", "assistant", "tool", "assistant"]
    assert _logged(ws, "deploy")[3].tool_results[0].name == "calendar"


async def test_memdir_log_keeps_message_times_and_ids(ws: Workspace, tmp_path: Path) -> None:
    source = _memdir_source(tmp_path)
    report = await ingest([source], workspace=ws)
    assert report.sessions[0].ledgers == ("memory/2026-10-03.md",)
    assert "## Memory Flush — 2026-10-03T08:30:20Z" in ws.read_text("memory/2026-10-03.md")
    ids = [m.id for m in load_transcript(source).messages]
    assert [m.id for m in _logged(ws, "standup")] == ids


async def test_ingesting_again_writes_nothing_new(ws: Workspace, tmp_path: Path) -> None:
    huge = tmp_path / "export.json"
    _huge_transcript(huge)
    sources = [BILLING, CHINESE, CLAUDE, huge]
    first = await ingest(sources, workspace=ws, compaction=SMALL)
    assert first.bullets > 0 and first.compactions > 0
    before = _snapshot(ws)
    again = await ingest(sources, workspace=ws, compaction=SMALL)
    assert _snapshot(ws) == before
    assert [s.session_id for s in again.sessions] == [s.session_id for s in first.sessions]
    assert all(s.already_ingested and s.logged == 0 and not s.bullets for s in again.sessions)
    assert again.consolidation is not None and again.consolidation.skipped == "nothing_new"


async def test_a_grown_transcript_adds_only_its_new_messages(ws: Workspace, tmp_path: Path) -> None:
    full = json.loads(BILLING.read_text(encoding="utf-8"))["messages"]
    source = tmp_path / "billing.json"
    source.write_text(json.dumps(full[:8]), encoding="utf-8")
    first = await ingest([source], workspace=ws)
    source.write_text(json.dumps(full), encoding="utf-8")
    second = await ingest([source], workspace=ws)
    assert (first.sessions[0].logged, second.sessions[0].logged) == (8, 7)
    assert not second.sessions[0].already_ingested
    logged = _logged(ws, "billing")
    assert len(logged) == len({m.id for m in logged}) == 15
    ledger = ws.read_text("memory/2026-11-30.md")
    for bullet in (*first.sessions[0].bullets, *second.sessions[0].bullets):
        assert ledger.count(f"- {bullet}\n") == 1


async def test_two_conversations_with_one_name_get_two_sessions(
    ws: Workspace, tmp_path: Path
) -> None:
    one, two = tmp_path / "a" / "chat.json", tmp_path / "b" / "chat.json"
    for path, text in ((one, "I prefer tea over coffee."), (two, "I prefer window seats.")):
        path.parent.mkdir()
        path.write_text(json.dumps([{"role": "user", "content": text}]), encoding="utf-8")
    report = await ingest([one, two], workspace=ws)
    assert [s.session_id for s in report.sessions] == ["chat", "chat-2"]
    # Later, in the other order: each file finds its own session again.
    again = await ingest([two, one], workspace=ws)
    assert [s.session_id for s in again.sessions] == ["chat-2", "chat"]
    assert all(s.already_ingested for s in again.sessions)
    assert "tea" in _logged(ws, "chat")[0].text and "window" in _logged(ws, "chat-2")[0].text


async def test_session_id_option(ws: Workspace) -> None:
    report = await ingest([BILLING, CHINESE], workspace=ws, session_id="import")
    assert [s.session_id for s in report.sessions] == ["import", "import-2"]
    with pytest.raises(ConfigError, match="invalid session id"):
        await ingest([BILLING], workspace=ws, session_id="../etc")


async def test_bad_files_are_reported_and_the_rest_ingested(ws: Workspace, tmp_path: Path) -> None:
    (tmp_path / "notes.json").write_text("just some text", encoding="utf-8")
    (tmp_path / "empty.json").write_text("[]", encoding="utf-8")
    missing = tmp_path / "missing.json"
    report = await ingest(
        [missing, tmp_path / "notes.json", BILLING, tmp_path / "empty.json"], workspace=ws
    )
    assert not report.ok
    assert [s.session_id for s in report.sessions] == ["billing-migration"]
    assert [Path(f.source).name for f in report.failures] == [
        "missing.json",
        "notes.json",
        "empty.json",
    ]
    assert all("\n" not in f.error and f.error for f in report.failures)
    assert "not found" in report.failures[0].error


async def test_a_failed_flush_is_retried_by_the_next_ingest(ws: Workspace) -> None:
    extractive = ExtractiveModel()

    async def flaky(call: ModelCall) -> Msg:
        if call.task == "flush":
            raise ModelError("provider unavailable", status_code=503)
        return (await extractive.generate(call.messages, system=call.system)).message

    first = await ingest([CHINESE], workspace=ws, model=FunctionModel(flaky), compaction=None)
    session = first.sessions[0]
    assert not session.bullets and session.warnings and session.logged == 9
    assert session.compactions == 0
    assert not (ws.memory_dir / "2026-11-30.md").exists()
    second = await ingest([CHINESE], workspace=ws)
    retried = second.sessions[0]
    assert retried.already_ingested and retried.bullets and retried.logged == 0
    assert "林晓雯" in ws.read_text("memory/2026-11-30.md")


def test_directories_stand_for_their_transcripts(tmp_path: Path) -> None:
    assert expand_paths([EXAMPLES]) == sorted([BILLING, CHINESE, CLAUDE])
    (tmp_path / "README.md").write_text("not a transcript", encoding="utf-8")
    (tmp_path / "x.jsonl").write_text("", encoding="utf-8")
    assert expand_paths([tmp_path, "missing.json"]) == [tmp_path / "x.jsonl", Path("missing.json")]


async def test_report_as_json(ws: Workspace) -> None:
    report = await ingest([CHINESE], workspace=ws)
    data = json.loads(json.dumps(report.to_dict(), ensure_ascii=False))
    assert data["totals"]["messages"] == 9 and data["ok"] is True
    assert data["sessions"][0]["bullets"] == list(report.sessions[0].bullets)
    assert data["memory_md"]["chars"] == len(ws.read_text("MEMORY.md"))
    assert msgs_to_json(_logged(ws, "log-migration-zh"))  # the log reads back as messages


async def test_a_log_with_earlier_summaries_is_ingested_once(ws: Workspace, tmp_path: Path) -> None:
    # A session log from another workspace: compaction summaries sit among the messages.
    first = await ingest([BILLING], workspace=ws, compaction=SMALL)
    assert first.sessions[0].compactions >= 1
    other = Workspace(tmp_path / "other", tz="UTC")
    source = tmp_path / "exported.log.jsonl"
    await ingest([CLAUDE], workspace=other, compaction=SMALL)
    source.write_bytes(next(other.sessions_dir.glob("*.log.jsonl")).read_bytes())
    msgs = load_transcript(source).messages
    assert any(m.name == SUMMARY_NAME for m in msgs)
    report = await ingest([source], workspace=ws, compaction=SMALL)
    assert report.sessions[0].logged == len(msgs)
    before = _snapshot(ws)
    again = await ingest([source], workspace=ws, compaction=SMALL)
    assert again.sessions[0].already_ingested and _snapshot(ws) == before
