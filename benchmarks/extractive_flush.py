"""Speed and yield of the offline ExtractiveModel's flush (no workspace, no I/O).

Messages are read where they lie (nothing is copied): LoCoMo conversations in English
(``locomo10.json``, speaker names kept, each message dated by its session) and the MemoryBank
dialogues in Chinese and English (user and assistant turns, dated by their day). Messages are
flushed two at a time, as a post-call hook would, once with nothing known and once with a
"known" text of the 200 bullets extracted before (what a busy day's ledger plus MEMORY.md
looks like). Reported per corpus: messages, bullets per message, characters kept against
characters read, and the time per message (median of 5 runs, and the slowest run).

Usage::

    python benchmarks/extractive_flush.py [--locomo PATH] [--memorybank DIR]
        [--conversations 5] [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path

from memdir.messages import Msg
from memdir.models.extractive._extract_memory import NO_REPLY, extract_facts

LOCOMO = Path("/work/shared/bench/locomo10.json")
MEMORYBANK = Path("/work/shared/bench/memorybank/raw")


def locomo(path: Path, conversations: int) -> list[Msg]:
    out = []
    for record in json.loads(path.read_text(encoding="utf-8"))[:conversations]:
        conv = record["conversation"]
        for key, turns in conv.items():
            if not key.startswith("session_") or key.endswith("date_time") or not turns:
                continue
            when = datetime.strptime(conv[f"{key}_date_time"], "%I:%M %p on %d %B, %Y")
            for turn in turns:
                out.append(
                    Msg.user(
                        str(turn.get("text") or ""),
                        name=str(turn["speaker"]),
                        created_at=when.replace(tzinfo=UTC),
                    )
                )
    return out


def memorybank(path: Path) -> list[Msg]:
    out = []
    for person in json.loads(path.read_text(encoding="utf-8")).values():
        for day, turns in person["history"].items():
            when = datetime.fromisoformat(day).replace(tzinfo=UTC)
            for turn in turns:
                out.append(Msg.user(str(turn["query"]), created_at=when))
                out.append(Msg.assistant(str(turn["response"]), created_at=when))
    return out


def run(msgs: list[Msg], known: str) -> tuple[float, list[str]]:
    bullets: list[str] = []
    began = time.perf_counter()
    for i in range(0, len(msgs), 2):
        text = extract_facts(msgs[i : i + 2], known)
        if text != NO_REPLY:
            bullets += text.splitlines()
    return time.perf_counter() - began, bullets


def measure(name: str, msgs: list[Msg], runs: int) -> None:
    seconds, bullets = [], []
    for _ in range(runs):
        elapsed, bullets = run(msgs, "")
        seconds.append(elapsed)
    known = "\n".join(bullets[:200])
    with_known = [run(msgs, known)[0] for _ in range(runs)]
    read = sum(len(m.text) for m in msgs)
    kept = sum(len(b) for b in bullets)
    per_msg = 1000 / len(msgs)
    print(
        f"| {name} | {len(msgs)} | {len(bullets) / len(msgs):.2f} | {kept / read:.0%} | "
        f"{statistics.median(seconds) * per_msg:.3f} ({max(seconds) * per_msg:.3f}) | "
        f"{statistics.median(with_known) * per_msg:.3f} ({max(with_known) * per_msg:.3f}) |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--locomo", type=Path, default=LOCOMO)
    parser.add_argument("--memorybank", type=Path, default=MEMORYBANK)
    parser.add_argument("--conversations", type=int, default=5)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    print(
        "| corpus | messages | bullets per message | characters kept | "
        "ms per message, median (max) | with 200 known bullets |"
    )
    print("|" + "---|" * 6)
    measure("LoCoMo (en)", locomo(args.locomo, args.conversations), args.runs)
    measure("MemoryBank (zh)", memorybank(args.memorybank / "memory_bank_cn.json"), args.runs)
    measure("MemoryBank (en)", memorybank(args.memorybank / "memory_bank_en.json"), args.runs)


if __name__ == "__main__":
    main()
