"""Session search: facts said once in a long history of sessions, found again.

A workspace gets ``--sessions`` session logs of ``--messages`` messages each: user and
assistant turns about an office move drawn from a fixed vocabulary (so every message shares
words with the others), tool calls and results among them. ``--facts`` facts are said once
each, in a user message of a random session ("the door code for the Porto archive is
K4471"); each is asked for with other words ("what was the Porto archive door code?").

Reported: the time to build the session index from the logs, a refresh with nothing new, a
refresh after one appended message (what it reads: one log's new end), median and p95 time
of ``search_sessions`` with 5 hits, and how many facts are in the top 1 and the top 5. With
``--postgres URL`` the same runs on a PostgreSQL workspace, whose session index is kept in
memory and built by reading every log through the workspace.

With ``--beam FILE`` (a memret/1 file of long chats, BEAM's) each chat is written as one
session log instead, its messages dated by their batch, one workspace per chat, and each
question of the chat is asked with ``search_sessions(limit=50)``; the hits (log lines) are
mapped to the messages and scored as ``retrieval.py`` scores memory search (R@k, MRR, per
category), with the search latency.

Usage::

    python benchmarks/session_search.py [--sessions 100] [--messages 200] [--facts 100]
        [--postgres postgresql://...]
    python benchmarks/session_search.py --beam $BENCH/beam/memret_100k.json [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

PLACES = ["Lisbon", "Porto", "Madrid", "Berlin", "Oslo", "Turin", "Ghent", "Bergen", "Cork"]
ROOMS = ["archive", "storage room", "server room", "kitchen", "lobby", "garage", "studio"]
THINGS = ["door code", "alarm pin", "wifi password", "locker number", "badge id", "gate code"]
WORDS = [
    "move",
    "office",
    "chairs",
    "desks",
    "boxes",
    "network",
    "cabinet",
    "printer",
    "floor",
    "lift",
    "van",
    "movers",
    "plan",
    "schedule",
    "budget",
    "invoice",
    "review",
    "meeting",
    "facilities",
    "keys",
    "label",
    "cable",
    "rack",
    "monitor",
    "code",
    "door",
    "room",
    "storage",
    "archive",
    "team",
    "week",
    "friday",
    "monday",
    "list",
    "order",
    "ship",
    "deliver",
]


def _filler(rng: random.Random) -> str:
    place, room = rng.choice(PLACES), rng.choice(ROOMS)
    words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 18)))
    return f"For the {place} {room}: {words}."


def build(ws: Any, sessions: int, messages: int, facts: int, seed: int) -> list[tuple[str, str]]:
    """Write the logs; return ``(question, expected answer)`` per fact."""
    from memdir.messages import Msg, ToolUseBlock
    from memdir.sessions import SessionLog

    rng = random.Random(seed)
    planted: dict[int, list[str]] = {}
    asked: list[tuple[str, str]] = []
    seen: set[tuple[str, str, str]] = set()
    while len(asked) < facts:
        key = (rng.choice(THINGS), rng.choice(PLACES), rng.choice(ROOMS))
        if key in seen:
            continue
        seen.add(key)
        thing, place, room = key
        answer = f"K{rng.randint(1000, 9999)}{len(asked)}"
        text = f"By the way, the {thing} for the {place} {room} is {answer}."
        planted.setdefault(rng.randrange(sessions), []).append(text)
        asked.append((f"what was the {place} {room} {thing}?", answer))
    for s in range(sessions):
        msgs: list[Msg] = []
        said = list(planted.get(s, []))
        for i in range(messages):
            if said and rng.random() < 0.05:
                msgs.append(Msg.user(said.pop()))
            elif i % 10 == 9:
                call = ToolUseBlock(id=f"c{s}-{i}", name="read_file", input={"path": "plan.md"})
                msgs.append(Msg.assistant(tool_calls=[call]))
                msgs.append(Msg.tool_result(call.id, _filler(rng), name="read_file"))
            else:
                msgs.append(Msg.user(_filler(rng)) if i % 2 else Msg.assistant(_filler(rng)))
        msgs.extend(Msg.user(text) for text in said)
        SessionLog(ws, f"s{s:04d}").append(msgs, fsync=False)
    return asked


def measure(ws: Any, asked: list[tuple[str, str]]) -> dict[str, Any]:
    """Build, refresh and search the session index of ``ws``."""
    from memdir.messages import Msg
    from memdir.sessions import SessionIndex, SessionLog, search_sessions

    index = SessionIndex(ws)
    started = time.perf_counter()
    built = index.refresh()
    build_s = time.perf_counter() - started
    started = time.perf_counter()
    index.refresh()
    idle_s = time.perf_counter() - started
    SessionLog(ws, "s0000").append([Msg.user("One more note about the van.")], fsync=False)
    started = time.perf_counter()
    grown = index.refresh()
    append_s = time.perf_counter() - started
    times: list[float] = []
    top1 = top5 = 0
    for question, answer in asked:
        started = time.perf_counter()
        hits = search_sessions(index, question, limit=5)
        times.append(time.perf_counter() - started)
        ranks = [i for i, hit in enumerate(hits) if answer in hit.text]
        top1 += bool(ranks and ranks[0] == 0)
        top5 += bool(ranks)
    index.close()
    times.sort()
    return {
        "messages": built.messages_indexed,
        "build_s": build_s,
        "idle_refresh_ms": idle_s * 1000,
        "append_refresh_ms": append_s * 1000,
        "append_messages": grown.messages_indexed,
        "search_p50_ms": statistics.median(times) * 1000,
        "search_p95_ms": times[int(len(times) * 0.95) - 1] * 1000,
        "top1": top1,
        "top5": top5,
        "facts": len(asked),
    }


def run_beam(path: Path) -> dict[str, Any]:
    """Session search over the chats of a memret/1 file, one log per chat (see above)."""
    from datetime import UTC, datetime

    from memdir.messages import Msg
    from memdir.sessions import SessionIndex, SessionLog, search_sessions
    from memdir.workspace import Workspace
    from retrieval import METRICS, load_memret, score_query, sessions_of

    _, corpora, by_corpus = load_memret(path)
    rows: list[dict[str, Any]] = []
    build_s = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for number, corpus in enumerate(corpora):
            ws = Workspace(Path(tmp) / f"c{number}", tz="UTC")
            docs = [d for d in corpus["docs"] if str(d.get("text") or "").strip()]
            msgs = [
                (Msg.user if d.get("speaker") == "user" else Msg.assistant)(
                    str(d["text"]),
                    created_at=datetime.fromisoformat(d["date"]).replace(tzinfo=UTC),
                )
                for d in docs
            ]
            SessionLog(ws, "chat").append(msgs, fsync=False)
            line_doc = {line: d["id"] for line, d in enumerate(docs, start=1)}
            session_of = sessions_of(corpus["docs"])
            index = SessionIndex(ws)
            started = time.perf_counter()
            index.refresh()
            build_s += time.perf_counter() - started
            for query in by_corpus.get(corpus["id"], []):
                relevant = set(query.get("relevant") or [])
                if not relevant:
                    continue
                started = time.perf_counter()
                hits = search_sessions(index, query["text"], limit=50)
                ms = (time.perf_counter() - started) * 1000
                ranked = list(dict.fromkeys(line_doc[h.line] for h in hits if h.line in line_doc))
                rows.append(
                    {
                        "category": query.get("category") or "all",
                        "ms": ms,
                        "metrics": score_query(ranked, relevant, session_of),
                    }
                )
            index.close()
    groups: dict[str, list[dict[str, Any]]] = {"overall": rows}
    for row in rows:
        groups.setdefault(row["category"], []).append(row)
    summaries: dict[str, dict[str, float]] = {}
    for name, group in groups.items():
        lat = sorted(r["ms"] for r in group)
        summaries[name] = {m: statistics.fmean(r["metrics"][m] for r in group) for m in METRICS}
        summaries[name] |= {
            "n": len(group),
            "p50_ms": statistics.median(lat),
            "p99_ms": lat[min(len(lat) - 1, int(len(lat) * 0.99))],
        }
    return {"file": str(path), "build_s": build_s, "summaries": summaries}


def _print_beam(result: dict[str, Any]) -> None:
    print(f"session search over {result['file']} (index build {result['build_s']:.2f} s)\n")
    shown = ("R@1", "R@5", "R@10", "MRR")
    print("| group | n | " + " | ".join(shown) + " | p50 ms | p99 ms |")
    print("|---|---:|" + "---:|" * (len(shown) + 2))
    for name, s in result["summaries"].items():
        cells = " | ".join(f"{s[m]:.3f}" for m in shown)
        print(f"| {name} | {int(s['n'])} | {cells} | {s['p50_ms']:.2f} | {s['p99_ms']:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--messages", type=int, default=200)
    parser.add_argument("--facts", type=int, default=100)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--postgres", metavar="URL", help="also run on this PostgreSQL workspace")
    parser.add_argument("--beam", type=Path, metavar="FILE", help="a memret/1 file of chats")
    parser.add_argument("--json", type=Path, help="with --beam: write the summaries here")
    args = parser.parse_args()
    if args.beam:
        result = run_beam(args.beam)
        _print_beam(result)
        if args.json:
            args.json.write_text(json.dumps(result, indent=1), encoding="utf-8")
        return
    from memdir.workspace import Workspace

    stores: list[tuple[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        stores.append(("files", Workspace(Path(tmp) / "ws", tz="UTC")))
        if args.postgres:
            stores.append(("postgresql", Workspace(args.postgres, tz="UTC")))
        for name, ws in stores:
            asked = build(ws, args.sessions, args.messages, args.facts, args.seed)
            r = measure(ws, asked)
            print(
                f"{name}: {r['messages']:,} messages indexed in {r['build_s']:.2f} s; refresh "
                f"{r['idle_refresh_ms']:.1f} ms with nothing new, {r['append_refresh_ms']:.1f} ms "
                f"after one append ({r['append_messages']} message); search p50 "
                f"{r['search_p50_ms']:.1f} ms, p95 {r['search_p95_ms']:.1f} ms; facts in the "
                f"top 1: {r['top1']}/{r['facts']}, top 5: {r['top5']}/{r['facts']}"
            )


if __name__ == "__main__":
    main()
