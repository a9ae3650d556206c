"""Replay LoCoMo conversations through flush + consolidation (offline, ExtractiveModel).

For each of the first N conversations of ``locomo10.json`` (read from where it lies; nothing is
copied), a fresh workspace is created and the sessions are replayed in date order with the
workspace clock set to each session's date. Within a session, every exchange (two turns) ends
with a flush of the whole context so far, as an agent's post-call hook would do (the cursor
makes each turn extracted once); the session ends with one consolidation, as the maintenance
scheduler would run it between sessions days apart. Both speakers are users (``name`` =
speaker); image captions are appended as ``[image: …]``.

Reported per conversation and overall:

- ledger bytes, ``MEMORY.md`` characters against the budget (max over all sessions);
- duplicate bullets inside ``MEMORY.md`` and across all ledgers (normalized text);
- wall time per session (all flushes + the consolidation): median and max;
- Answer@5, an offline proxy of what memory kept: for each answerable question (categories
  1-4), does one of the top-5 ``MemoryIndex.search`` hits contain the gold answer text
  (case-folded, whitespace collapsed)? Measured over the resulting memory (ledgers +
  ``MEMORY.md``), over ``MEMORY.md`` alone (top 5 of its hits), and over the raw turns written
  one bullet per turn as in ``benchmarks/retrieval.py``.

Usage::

    python benchmarks/memory_replay.py [--data PATH] [--conversations 5]
        [--max-memory-tokens 4000] [--json OUT]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memdir import MemoryConsolidator, MemoryFlushManager, MemoryIndex, Msg, Workspace
from memdir.memory._entries import parse_bullets
from memdir.models import ExtractiveModel
from memdir.store.ledger import normalize_bullet
from retrieval import write_corpus

DATA = Path("/work/shared/bench/locomo10.json")
ADVERSARIAL = 5


class Clock:
    """A settable clock for the replay."""

    def __init__(self) -> None:
        self.now = datetime(2000, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def sessions(conv: dict[str, Any]) -> list[tuple[datetime, str, list[dict[str, Any]]]]:
    """``(start, name, turns)`` of every session, in date order."""
    out = []
    for key, turns in conv.items():
        if not key.startswith("session_") or key.endswith("date_time") or not turns:
            continue
        when = datetime.strptime(conv[f"{key}_date_time"], "%I:%M %p on %d %B, %Y")
        out.append((when.replace(tzinfo=UTC), key, turns))
    out.sort(key=lambda item: (item[0], int(item[1].split("_")[1])))
    return out


def turn_text(turn: dict[str, Any]) -> str:
    text = " ".join(str(turn.get("text") or "").split())
    if turn.get("blip_caption"):
        text += f" [image: {' '.join(str(turn['blip_caption']).split())}]"
    return text


def norm(text: str) -> str:
    return " ".join(str(text).casefold().split())


def answer_at_5(index: MemoryIndex, qa: list[dict[str, Any]], *, only: str | None = None) -> float:
    found = 0
    for item in qa:
        gold = norm(item["answer"])
        hits = index.search(item["question"], limit=50 if only else 5)
        if only:
            hits = [h for h in hits if h.path == only]
        found += any(gold in norm(h.content) for h in hits[:5])
    return found / len(qa) if qa else 0.0


def duplicates(texts: list[str]) -> int:
    counts = Counter(normalize_bullet(t) for t in texts)
    return sum(n - 1 for n in counts.values() if n > 1)


async def replay(conv_record: dict[str, Any], tmp: Path, max_tokens: int) -> dict[str, Any]:
    conv = conv_record["conversation"]
    clock = Clock()
    ws = Workspace(tmp / conv_record["sample_id"] / "memory", tz="UTC", clock=clock)
    model = ExtractiveModel()
    index = MemoryIndex(ws).open()
    flusher = MemoryFlushManager(ws, model, index=index)
    consolidator = MemoryConsolidator(ws, model, index=index, max_memory_tokens=max_tokens)
    seconds: list[float] = []
    max_memory = 0
    consolidator_trimmed = 0
    skipped: Counter[str] = Counter()
    raw_docs: list[dict[str, Any]] = []
    for start, name, turns in sessions(conv):
        clock.now = start
        session_id = f"{conv_record['sample_id']}-{name}"
        context: list[Msg] = []
        began = time.perf_counter()
        for i, turn in enumerate(turns):
            context.append(Msg.user(turn_text(turn), name=str(turn["speaker"]), created_at=start))
            raw_docs.append(
                {
                    "id": turn["dia_id"],
                    "session": name,
                    "date": start.date().isoformat(),
                    "time": start.strftime("%H:%M"),
                    "speaker": turn["speaker"],
                    "text": turn.get("text") or "",
                    "caption": turn.get("blip_caption"),
                }
            )
            if i % 2 == 1 or i == len(turns) - 1:
                result = await flusher.flush_memories(context, session_id=session_id)
                if result.skipped:
                    skipped[result.skipped] += 1
        outcome = await consolidator.consolidate()
        consolidator_trimmed += len(outcome.trimmed)
        seconds.append(time.perf_counter() - began)
        if outcome.skipped and outcome.skipped != "nothing_new":
            skipped[f"consolidate:{outcome.skipped}"] += 1
        max_memory = max(max_memory, len(ws.read_text("MEMORY.md")))
    memory_text = ws.read_text("MEMORY.md")
    ledger_bullets = [b.text for _, rel in ws.ledgers() for b in parse_bullets(ws.read_text(rel))]
    qa = [q for q in conv_record["qa"] if q.get("category") != ADVERSARIAL and "answer" in q]
    index.refresh()
    memory_score = answer_at_5(index, qa)
    memory_md_score = answer_at_5(index, qa, only="MEMORY.md")
    index.close()
    raw_root = tmp / conv_record["sample_id"] / "raw"
    write_corpus(raw_root, raw_docs)
    with MemoryIndex(Workspace(raw_root, tz="UTC")) as raw_index:
        raw_index.index_all_from_workspace()
        raw_score = answer_at_5(raw_index, qa)
    return {
        "conversation": conv_record["sample_id"],
        "sessions": len(seconds),
        "turns": len(raw_docs),
        "questions": len(qa),
        "ledger_bytes": sum((ws.root / rel).stat().st_size for _, rel in ws.ledgers()),
        "ledger_bullets": len(ledger_bullets),
        "memory_chars": len(memory_text),
        "memory_chars_max": max_memory,
        "budget_chars": consolidator.max_chars,
        "memory_bullets": len(parse_bullets(memory_text)),
        "trimmed": consolidator_trimmed,
        "memory_duplicates": duplicates([b.text for b in parse_bullets(memory_text)]),
        "ledger_duplicates": duplicates(ledger_bullets),
        "session_seconds_median": statistics.median(seconds),
        "session_seconds_max": max(seconds),
        "answer5_memory": memory_score,
        "answer5_memory_md": memory_md_score,
        "answer5_raw": raw_score,
        "skips": dict(skipped),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--conversations", type=int, default=5)
    parser.add_argument("--max-memory-tokens", type=int, default=4000, help="MEMORY.md budget")
    parser.add_argument("--json", type=Path, help="write the per-conversation rows here")
    args = parser.parse_args()
    records = json.loads(args.data.read_text(encoding="utf-8"))[: args.conversations]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for record in records:
            row = asyncio.run(replay(record, Path(tmp), args.max_memory_tokens))
            rows.append(row)
            print(json.dumps(row), file=sys.stderr)
    header = (
        "| conversation | sessions | turns | ledger KB | MEMORY.md chars (max) / budget | "
        "dup MEMORY.md / ledgers | s per session median (max) | Answer@5 memory | "
        "MEMORY.md only | raw turns |"
    )
    print(header)
    print("|" + "---|" * 10)
    for r in rows:
        print(
            f"| {r['conversation']} | {r['sessions']} | {r['turns']} | "
            f"{r['ledger_bytes'] / 1024:.1f} | {r['memory_chars']} ({r['memory_chars_max']}) / "
            f"{r['budget_chars']} | {r['memory_duplicates']} / {r['ledger_duplicates']} | "
            f"{r['session_seconds_median']:.3f} ({r['session_seconds_max']:.3f}) | "
            f"{r['answer5_memory']:.3f} | {r['answer5_memory_md']:.3f} | {r['answer5_raw']:.3f} |"
        )
    n = sum(r["questions"] for r in rows)

    def weighted(key: str) -> float:
        return sum(r[key] * r["questions"] for r in rows) / n

    all_seconds = [r["session_seconds_max"] for r in rows]
    print(
        f"| all ({n} questions) | {sum(r['sessions'] for r in rows)} | "
        f"{sum(r['turns'] for r in rows)} | "
        f"{sum(r['ledger_bytes'] for r in rows) / 1024:.1f} | "
        f"max {max(r['memory_chars_max'] for r in rows)} / {rows[0]['budget_chars']} | "
        f"{sum(r['memory_duplicates'] for r in rows)} / "
        f"{sum(r['ledger_duplicates'] for r in rows)} | "
        f"max {max(all_seconds):.3f} | {weighted('answer5_memory'):.3f} | "
        f"{weighted('answer5_memory_md'):.3f} | {weighted('answer5_raw'):.3f} |"
    )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
