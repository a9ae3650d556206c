"""memdir forget: a fact erased from every place it lives, on each store; a namespace deleted.

The canaries are planted through the public paths (a chat, flush, consolidation, compaction,
eviction, ingest, memory_add), forgotten, and then looked for in every byte of the workspace
(SQLite files, WAL and journals included) or a pg_dump of its schema, and through every read.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from _canaries import CANARIES, KEPT, LATIN, MIXED, hits, plant, scan_store, scan_tree
from memdir import HarnessAgent
from memdir.forget import Target, apply_forget, delete_namespace, plan_forget, resume_erasures
from memdir.memory import MemoryConsolidator, MemoryFlushManager
from memdir.messages import Msg
from memdir.models import ExtractiveModel
from memdir.store.transfer import export_workspace
from memdir.testing import FunctionModel, ModelCall
from memdir.tools import memory_add, memory_get, memory_search, session_search
from memdir.workspace import Workspace


def _forget(ws: Workspace, text: str) -> None:
    plan = plan_forget(ws, Target(text=text))
    assert not plan.empty, text
    apply_forget(ws, plan, by="test")


def test_forgotten_canaries_leave_no_byte_and_no_hit(any_ws: Workspace, tmp_path: Path) -> None:
    plant(any_ws, tmp_path)
    assert scan_store(any_ws)  # the canaries are there to begin with
    for canary in CANARIES:
        _forget(any_ws, canary)
    assert scan_store(any_ws) == {}
    for canary in CANARIES:
        assert "No memories matched" in memory_search(canary, workspace=any_ws)
        assert not hits(session_search(canary, workspace=any_ws).encode(), [canary]) or (
            "No " in session_search(canary, workspace=any_ws)
        )
    for rel in any_ws.memory_files():
        assert not hits(memory_get(rel, 1, 10_000, workspace=any_ws).encode())
    out = tmp_path / "export"
    export_workspace(any_ws, out)
    assert scan_tree(out) == {}
    assert "6543" in memory_search("staging database port", workspace=any_ws)  # kept
    again = HarnessAgent(
        model=FunctionModel(lambda call: "ok"),
        workspace=any_ws,
        memory_flush=False,
        maintenance=None,
    )
    resumed = " ".join(m.text for m in again.history())
    assert "migration plan" in resumed and not hits(resumed.encode())  # it still loads
    erased = any_ws.read_text("memory/.forget/erased.jsonl")
    assert erased.count('"kind": "facts"') == len(CANARIES) and not hits(erased.encode())


def test_forgetting_what_is_not_there_says_so_and_changes_nothing(any_ws: Workspace) -> None:
    memory_add(KEPT, workspace=any_ws)
    before = {rel: any_ws.read_bytes(rel) for rel, _ in any_ws.walk("memory")}
    plan = plan_forget(any_ws, Target(text="no such fact anywhere"))
    assert plan.empty and "nothing to forget" in plan.describe()
    report = apply_forget(any_ws, plan)
    assert report.erased == 0
    after = {rel: any_ws.read_bytes(rel) for rel, _ in any_ws.walk("memory")}
    after.pop("memory/.forget/secret", None)
    assert after == before


def test_a_cited_line_goes_and_the_ledger_says_something_was_erased(any_ws: Workspace) -> None:
    memory_add(f"The vault word is {LATIN}.", workspace=any_ws)
    memory_add(KEPT, workspace=any_ws)
    rel = any_ws.ledger_rel()
    line = next(i for i, text in enumerate(any_ws.read_text(rel).split("\n"), 1) if LATIN in text)
    apply_forget(any_ws, plan_forget(any_ws, Target(citation=f"{rel}#L{line}")))
    ledger = any_ws.read_text(rel)
    assert LATIN not in ledger and KEPT in ledger
    assert "a fact was erased here" in ledger.split("\n")[line - 1]


def test_a_later_flush_or_consolidation_does_not_bring_it_back(any_ws: Workspace) -> None:
    convo = [Msg.user(f"Remember that the vault word is {LATIN}."), Msg.user(KEPT)]
    asyncio.run(MemoryFlushManager(any_ws, ExtractiveModel()).flush_memories(convo, session_id="a"))
    _forget(any_ws, LATIN)
    # The same conversation, still held by an agent, flushed again under another session.
    asyncio.run(MemoryFlushManager(any_ws, ExtractiveModel()).flush_memories(convo, session_id="b"))
    asyncio.run(MemoryConsolidator(any_ws, ExtractiveModel()).consolidate())
    assert scan_store(any_ws, [LATIN]) == {}


def test_a_consolidation_batch_read_before_the_erasure_writes_nothing(any_ws: Workspace) -> None:
    memory_add(f"The release codename is {MIXED}.", workspace=any_ws)

    def model(call: ModelCall) -> str:
        _forget(any_ws, MIXED)  # the erasure lands while the model is working on the batch
        return f"# Memory\n\n- Codename on file: {MIXED}\n"  # reworded: no key matches it

    result = asyncio.run(MemoryConsolidator(any_ws, FunctionModel(model)).consolidate())
    assert not result.applied
    assert scan_store(any_ws, [MIXED]) == {}


def _namespace_bytes(ws: Workspace) -> dict[str, str]:
    return {
        rel: hashlib.sha256(ws.read_bytes(rel)).hexdigest()
        for rel, _ in ws.walk("")
        if not rel.startswith(".index/")
    }


def test_deleting_a_namespace_leaves_the_others_as_they_were(
    any_ws: Workspace, tmp_path: Path
) -> None:
    alice = any_ws.namespaced("alice")
    bob = any_ws.namespaced("bob")
    plant(alice, tmp_path)
    memory_add(KEPT, workspace=bob)
    assert "6543" in memory_search("staging database port", workspace=bob)
    before = _namespace_bytes(bob)
    deleted = delete_namespace(any_ws, "alice", by="test")
    assert deleted.files > 0
    assert any_ws.namespaces() == ["bob"]
    assert _namespace_bytes(bob) == before
    assert "6543" in memory_search("staging database port", workspace=bob)
    assert scan_store(any_ws) == {}
    erased = any_ws.read_text("memory/.forget/erased.jsonl")
    assert '"kind": "namespace"' in erased and "alice" not in erased
    with pytest.raises(Exception, match="no namespace"):
        delete_namespace(any_ws, "alice")


_CHILD = """
import sys
from memdir.forget import Target, apply_forget, delete_namespace, plan_forget
from memdir.workspace import Workspace
ws = Workspace(sys.argv[1], tz="UTC")
if sys.argv[2] == "namespace":
    delete_namespace(ws, "alice")
else:
    apply_forget(ws, plan_forget(ws, Target(text=sys.argv[2])))
"""


def _killed_at(root: str, what: str, point: str, tmp_path: Path) -> None:
    marker = tmp_path / f"paused-{point.replace(':', '-')}"
    env = {
        **os.environ,
        "MEMDIR_TEST_PAUSE_AT": point,
        "MEMDIR_TEST_PAUSE_FILE": str(marker),
        "MEMDIR_TEST_PAUSE_SECONDS": "600",
        "PYTHONPATH": os.pathsep.join(sys.path),
    }
    child = subprocess.Popen([sys.executable, "-c", _CHILD, root, what], env=env)
    while not marker.exists():  # wait on the event (the pause file), not on a time
        assert child.poll() is None, "the forget ended before its pause point"
        time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    child.wait()


@pytest.mark.parametrize(
    "point", ["forget:journal-written", "forget:file-scrubbed", "forget:before-index"]
)
def test_a_forget_killed_at_any_point_is_completed_by_the_next_run(
    any_ws: Workspace, tmp_path: Path, point: str
) -> None:
    plant(any_ws, tmp_path)
    root = any_ws.url if any_ws.url is not None else str(any_ws.base)
    _killed_at(root, LATIN, point, tmp_path)
    assert resume_erasures(any_ws) == 1
    assert scan_store(any_ws, [LATIN]) == {}
    assert "6543" in memory_search("staging database port", workspace=any_ws)
    assert resume_erasures(any_ws) == 0


def test_a_namespace_delete_killed_half_way_is_completed(any_ws: Workspace, tmp_path: Path) -> None:
    plant(any_ws.namespaced("alice"), tmp_path)
    memory_add(KEPT, workspace=any_ws.namespaced("bob"))
    root = any_ws.url if any_ws.url is not None else str(any_ws.base)
    point = "namespace-delete:renamed" if any_ws.is_local else "namespace-delete:rows-deleted"
    _killed_at(root, "namespace", point, tmp_path)
    assert "alice" not in any_ws.namespaces()
    assert resume_erasures(any_ws) == 1
    assert scan_store(any_ws) == {}
    assert "6543" in memory_search("staging database port", workspace=any_ws.namespaced("bob"))


def test_a_line_appended_during_the_erasure_is_kept(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory_add(f"The vault word is {LATIN}.", workspace=ws)
    rel = ws.ledger_rel()
    plan = plan_forget(ws, Target(text=LATIN))
    raced: list[str] = []

    def racing(read: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(path: str, *args: Any, **kwargs: Any) -> Any:
            found = read(path, *args, **kwargs)
            if path == rel and not raced:  # another writer appends right after the read
                raced.append(path)
                ws.append_text(rel, f"- {KEPT}\n")
            return found

        return wrapped

    monkeypatch.setattr(ws, "read_bytes", racing(ws.read_bytes))
    monkeypatch.setattr(ws, "read_versioned", racing(ws.read_versioned))
    apply_forget(ws, plan)
    ledger = ws.read_text(rel)
    assert raced and KEPT in ledger and LATIN not in ledger


def test_deleting_a_namespace_revokes_the_keys_bound_to_it(any_ws: Workspace) -> None:
    from _server import create_key
    from memdir.server.auth import open_key_store

    root = any_ws.url if any_ws.url is not None else str(any_ws.base)
    bound = create_key(root, "acme", "write", "--namespace", "acme.alice")
    other = create_key(root, "acme", "write", "--namespace", "acme.bob")
    wide = create_key(root, "acme", "admin")  # reaches every acme.* namespace: it stays
    memory_add(KEPT, workspace=any_ws.namespaced("acme.alice"))
    memory_add(KEPT, workspace=any_ws.namespaced("acme.bob"))
    assert delete_namespace(any_ws, "acme.alice").keys_revoked == 1
    store = open_key_store(any_ws)
    revoked = {r.key_id: r.revoked_at is not None for r in store.records()}
    assert revoked == {bound["key_id"]: True, other["key_id"]: False, wide["key_id"]: False}


def test_a_cited_line_takes_its_copies_not_every_line_that_contains_it(ws: Workspace) -> None:
    memory_add("- Deploy on Fridays", workspace=ws)
    memory_add("- Never deploy on Fridays before a holiday", workspace=ws)
    ws.write_text("MEMORY.md", "# Memory\n\n- deploy on fridays.\n")  # a copy, re-cased
    rel = ws.ledger_rel()
    line = ws.read_text(rel).split("\n").index("- Deploy on Fridays") + 1
    apply_forget(ws, plan_forget(ws, Target.of(f"{rel}#L{line}")))
    assert "- Never deploy on Fridays before a holiday" in ws.read_text(rel)
    assert "- Deploy on Fridays" not in ws.read_text(rel)
    assert "fridays" not in ws.read_text("MEMORY.md")


def test_the_erasures_secret_is_not_a_memory_file_the_tools_read(ws: Workspace) -> None:
    memory_add(f"The vault word is {LATIN}.", workspace=ws)
    _forget(ws, LATIN)
    secret = ws.read_text("memory/.forget/secret").strip()
    for rel in ("memory/.forget/secret", "memory/.forget/erased.jsonl", "memory/./.forget/secret"):
        answer = memory_get(rel, workspace=ws)
        assert answer.startswith("Error:") and "memdir's own state" in answer
        assert secret not in answer
    assert "vault" not in memory_get(ws.ledger_rel(), workspace=ws).lower()  # a ledger reads
