"""Share of MEMORY.md bullets whose sources exist and hold the fact's key words.

Two runs, offline (the extractive model flushes and consolidates):

- ``demo``: the ``memdir demo`` workspace after its ingest step (the sample's own
  ``MEMORY.md`` was written by hand before provenance existed: its bullets are reported
  apart, as they are unsourced by design);
- ``200-turn``: a scripted 200-turn conversation (100 user facts, 100 assistant replies),
  flushed after every turn and consolidated every 20 turns, its messages in the session log.

For each bullet, :func:`memdir.provenance._why.why` follows the chain; the bullet counts when
it has at least one ledger source that exists, each with session-log lines (or a hand-add
record), and every key word of the bullet (words of 4+ letters, digits kept, the speaker
label left out) appears in those conversation lines.

Usage::

    python benchmarks/provenance_share.py
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from memdir.memory import MemoryConsolidator, MemoryFlushManager
from memdir.memory._entries import parse_bullets
from memdir.messages import Msg
from memdir.models.extractive import ExtractiveModel
from memdir.provenance._why import Link, why
from memdir.sessions import SessionLog
from memdir.store.workspace import Workspace

_STOP = {"user", "that", "this", "with", "from", "have", "will", "been", "were", "they"}
_PEOPLE = ["Anna", "Bilal", "Chen Wei", "Dara", "Emeka", "Fatima", "Goran", "Hana", "Ivan", "Jun"]
_TOOLS = ["PostgreSQL", "Redis", "Kafka", "Terraform", "Grafana", "Bazel", "Nginx", "Vault"]
_TEMPLATES = [
    "{p} owns the {t} migration; the deadline is 2027-0{m}-1{d}.",
    "We decided to pin {t} to version {v}.{d} for the billing service.",
    "I prefer {t} over the alternatives for project Orion{n}.",
    "{p} will review the {t} dashboards every Monday at 0{d}:30.",
    "{p}负责{t}的升级，截止日期是2027年{m}月{d}日。",
]


def key_words(text: str) -> set[str]:
    body = re.sub(r"^[^:：]{1,40}[:：]\s*", "", text)  # the speaker label
    words = {w for w in re.findall(r"[a-z0-9][a-z0-9.\-]{3,}", body.lower()) if w not in _STOP}
    words |= set(re.findall(r"[\u4e00-\u9fff]", body))
    return {w.strip(".-") for w in words} - {""}


def _leaves(link: Link) -> list[Link]:
    return [link] if not link.sources else [x for s in link.sources for x in _leaves(s)]


def check(ws: Workspace, hand_written: set[str]) -> tuple[int, int, int, list[str]]:
    """``(bullets checked, good, hand-written skipped, failures)`` for ws's MEMORY.md."""
    bullets = parse_bullets(ws.read_text("MEMORY.md"))
    good = skipped = 0
    bad: list[str] = []
    for bullet in bullets:
        if bullet.key in hand_written:
            skipped += 1
            continue
        chain = why(ws, f"MEMORY.md#L{bullet.first_line + 1}")
        ledgers = [s for s in chain.sources if s.citation]
        leaves = [x for s in ledgers for x in _leaves(s)]
        spoken = " ".join(x.text for x in leaves if x.citation.startswith("sessions/")).lower()
        added = any(s.note.startswith("added by") for s in ledgers)
        missing = key_words(bullet.text) - key_words("x: " + spoken) if not added else set()
        ok = bool(ledgers) and (added or (bool(spoken) and not missing))
        good += ok
        if not ok:
            bad.append(f"{bullet.text[:90]} (missing {sorted(missing)[:5]}; {chain.note})")
    return len(bullets) - skipped, good, skipped, bad


def demo() -> tuple[int, int, int, list[str]]:
    from memdir.cli._demo import (
        DEMO_COMPACTION,
        DEMO_EVICTION,
        create_demo_workspace,
        sample_transcripts_dir,
    )
    from memdir.ingest import ingest_sync

    with tempfile.TemporaryDirectory() as tmp:
        ws = create_demo_workspace(Path(tmp) / "workspace")
        hand = {b.key for b in parse_bullets(ws.read_text("MEMORY.md"))}
        files = sorted(
            p for p in sample_transcripts_dir().iterdir() if p.suffix in {".json", ".jsonl"}
        )
        ingest_sync(
            files, workspace=ws, compaction=DEMO_COMPACTION, tool_result_eviction=DEMO_EVICTION
        )
        return check(ws, hand)


async def scripted(turns: int = 200) -> tuple[int, int, int, list[str]]:
    start = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
    with tempfile.TemporaryDirectory() as tmp:
        now = [start]
        ws = Workspace(Path(tmp) / "ws", tz="UTC", clock=lambda: now[0])
        log = SessionLog(ws, "s200")
        flush = MemoryFlushManager(ws, ExtractiveModel())
        consolidator = MemoryConsolidator(ws, ExtractiveModel())
        history: list[Msg] = []
        for n in range(turns // 2):
            now[0] = start + timedelta(minutes=10 * n)
            text = _TEMPLATES[n % len(_TEMPLATES)].format(
                p=_PEOPLE[n % len(_PEOPLE)],
                t=_TOOLS[(n * 3) % len(_TOOLS)],
                m=1 + n % 9,
                d=n % 10,
                v=10 + n % 7,
                n=n,
            )
            user = dataclasses.replace(Msg.user(text), created_at=now[0])
            reply = dataclasses.replace(Msg.assistant("Noted."), created_at=now[0])
            history += [user, reply]
            log.append([user, reply])
            await flush.flush_memories(history, session_id="s200")
            if (n + 1) % 10 == 0:
                await consolidator.consolidate()
        await consolidator.consolidate()
        return check(ws, set())


def main() -> None:
    for name, result in (("demo", demo()), ("200-turn", asyncio.run(scripted()))):
        total, good, skipped, bad = result
        share = 100.0 * good / total if total else 0.0
        extra = f"; {skipped} hand-written sample bullets left out" if skipped else ""
        print(f"{name}: {good}/{total} bullets sourced with their key words ({share:.1f} %){extra}")
        for line in bad[:10]:
            print(f"  - {line}")


if __name__ == "__main__":
    main()
