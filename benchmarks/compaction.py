"""Compaction benchmarks: the compactor's own overhead, and what survives repeated compaction.

Usage::

    python benchmarks/compaction.py                    # both parts, Markdown on stdout
    python benchmarks/compaction.py --part overhead --sizes 100 1000 10000 --repeats 15
    python benchmarks/compaction.py --part needles --rounds 1 3 10

**Overhead.** Generated conversations of 100 / 1,000 / 10,000 messages (user turns, assistant
turns, tool calls with results of varied size). A model that answers instantly stands in for
the summariser, so what is timed is memdir's work only:

* *check, no compaction*: ``compact_if_needed`` on a conversation under its triggers (the call
  an agent makes before every model call), with the token counter's per-message cache warm
  (the usual case: one or two new messages per call) and cold (a fresh counter);
* *full compaction*: the whole ladder on a conversation over its triggers, in a fresh
  workspace each time: clearing of old tool results, pair-safe cut, fsync'd offload of the
  prefix to the session log, rendering of the summariser request, summary message, repair and
  checks.

**Needle survival.** A generated working session with planted needles: ticket ids, file paths,
decisions (``Decision: ...``) and, last, a pending user request. After the needles, the session
goes on with new messages and is compacted again and again (50-message trigger, 20 kept) by the
offline ``ExtractiveModel``, 1, 3 and 10 times in a row. A needle is *in context* if its text is
in the compacted conversation, and *reachable* if it is in context or in the session-log lines
that the (single) summary message names. The generator does not know what the summariser keeps.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from memdir.compaction import CompactionConfig, ConversationCompactor, summary_log
from memdir.messages import SUMMARY_NAME, Msg, ToolUseBlock
from memdir.models import model_from_string
from memdir.sessions import SessionLog
from memdir.testing import FunctionModel
from memdir.tokens import EstimatingCounter, TokenCounter
from memdir.workspace import Workspace

SUMMARY = "## SESSION INTENT\nx\n## SUMMARY\nx\n## ARTIFACTS\nNone\n## NEXT STEPS\nNone"
WORDS = [
    *("service", "deploy", "queue", "worker", "retry", "cache", "schema", "index", "latency"),
    *("budget", "release", "branch", "migration", "rollback", "config", "token", "session"),
    *("handler", "parser", "client", "server", "request"),
]

# -- conversations -------------------------------------------------------------------------------


def _sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def conversation(n: int, seed: int = 7) -> list[Msg]:
    """``n`` messages: user turns, assistant turns, and tool calls with results."""
    rng = random.Random(seed)
    out: list[Msg] = []
    k = 0
    while len(out) < n:
        out.append(Msg.user(_sentence(rng, rng.randint(8, 40))))
        for _ in range(rng.randint(0, 3)):
            k += 1
            call = ToolUseBlock(
                id=f"call_{k}", name="read_file", input={"path": f"src/{rng.choice(WORDS)}.py"}
            )
            out.append(Msg.assistant(tool_calls=[call]))
            body = "\n".join(_sentence(rng, 12) for _ in range(rng.choice([2, 10, 60])))
            out.append(Msg.tool_result(call.id, body, name="read_file"))
        out.append(Msg.assistant(_sentence(rng, rng.randint(10, 60))))
    return out[:n]


# -- overhead ------------------------------------------------------------------------------------


def _median_ms(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def _time_sizes(n: int, repeats: int) -> tuple[float, float, float]:
    model = FunctionModel(lambda call: SUMMARY)
    msgs = conversation(n)
    quiet = CompactionConfig(trigger_messages=0, trigger_tokens=10**9)
    counter: TokenCounter = EstimatingCounter(cache_size=100_000)
    with tempfile.TemporaryDirectory() as tmp:
        ws = Workspace(tmp)
        comp = ConversationCompactor(model, ws, quiet, token_counter=counter)

        def check() -> None:
            assert asyncio.run(comp.compact_if_needed(msgs, session_id="b")) is None

        check()  # warm the per-message cache
        warm = _median_ms(check, repeats)

        def cold() -> None:
            fresh = ConversationCompactor(
                model, ws, quiet, token_counter=EstimatingCounter(cache_size=100_000)
            )
            assert asyncio.run(fresh.compact_if_needed(msgs, session_id="b")) is None

        cold_ms = _median_ms(cold, max(3, repeats // 3))

    def full() -> None:
        with tempfile.TemporaryDirectory() as tmp2:
            comp2 = ConversationCompactor(
                model,
                Workspace(tmp2),
                CompactionConfig(trigger_messages=50, keep_messages=20),
                token_counter=counter,
            )
            res = asyncio.run(comp2.compact_if_needed(msgs, session_id="b"))
            assert res is not None and res.summary_message is not None

    return warm, cold_ms, _median_ms(full, max(3, repeats // 3))


def overhead(sizes: list[int], repeats: int) -> list[tuple[int, float, float, float]]:
    return [(n, *_time_sizes(n, repeats)) for n in sizes]


# -- needles -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Needle:
    kind: str
    text: str


def planted_session(seed: int = 11) -> tuple[list[Msg], list[Needle], Msg]:
    """126 messages with 12 needles planted among filler, ending in a pending request."""
    rng = random.Random(seed)
    needles = [
        *(Needle("identifier", f"TICKET-{rng.randint(10_000, 99_999)}") for _ in range(3)),
        *(
            Needle("identifier", f"build {rng.randint(1000, 9999)}-{rng.choice(WORDS)}")
            for _ in range(1)
        ),
        *(Needle("path", f"src/{rng.choice(WORDS)}/{rng.choice(WORDS)}_{i}.py") for i in range(4)),
        Needle(
            "decision", "Decision: use PostgreSQL advisory locks instead of Redis for the job lease"
        ),
        Needle("decision", "Decision: keep the retry budget at 3 attempts with jittered backoff"),
        Needle(
            "decision", "Decision: ship the schema migration behind the feature flag billing_v2"
        ),
    ]
    filler = conversation(110, seed=seed)
    slots = sorted(rng.sample(range(5, 100), len(needles)))
    out: list[Msg] = []
    k = 0
    for i, msg in enumerate(filler):
        out.append(msg)
        if k < len(needles) and i == slots[k]:
            needle = needles[k]
            if needle.kind == "path":
                call = ToolUseBlock(id=f"edit_{k}", name="edit_file", input={"path": needle.text})
                out.append(Msg.assistant(tool_calls=[call]))
                out.append(Msg.tool_result(call.id, "edited", name="edit_file"))
            elif needle.kind == "decision":
                out.append(Msg.assistant(f"{needle.text}. {_sentence(rng, 12)}"))
            else:
                out.append(Msg.user(f"Please look at {needle.text} next. {_sentence(rng, 10)}"))
            k += 1
    request = Msg.user("Now migrate the billing cron job to the new scheduler and report back.")
    needles.append(Needle("pending request", request.text))
    return [*out, request], needles, request


def needle_survival(rounds: list[int]) -> list[tuple[int, dict[str, tuple[int, int, int]], bool]]:
    results = []
    for total in rounds:
        msgs, needles, request = planted_session()
        with tempfile.TemporaryDirectory() as tmp:
            ws = Workspace(tmp)
            comp = ConversationCompactor(
                model_from_string("extractive"),
                ws,
                CompactionConfig(trigger_messages=50, trigger_tokens=0, keep_messages=20),
            )
            context = msgs
            done = 0
            extra_seed = 100
            while done < total:
                res = asyncio.run(comp.compact_if_needed(context, session_id="n"))
                if res is None:
                    raise SystemExit("compaction did not run")
                done += 1
                context = res.messages
                if done < total:
                    extra_seed += 1
                    # the work goes on; the pending request stays the latest user message
                    more = [m for m in conversation(60, seed=extra_seed) if m.role != "user"]
                    context = [*context, *more]
            log = SessionLog(ws, "n")
            summary = next(m for m in context if m.name == SUMMARY_NAME)
            span = summary_log(summary)
            assert span is not None
            logged = log.messages(span.start_line, span.end_line)
            in_context = _texts(context)
            in_log = _texts(logged)
            by_kind: dict[str, tuple[int, int, int]] = {}
            for needle in needles:
                n, c, r = by_kind.get(needle.kind, (0, 0, 0))
                present = needle.text in in_context
                by_kind[needle.kind] = (
                    n + 1,
                    c + present,
                    r + (present or needle.text in in_log),
                )
            verbatim = any(m == request for m in context)
            results.append((total, by_kind, verbatim))
    return results


def _texts(msgs: list[Msg]) -> str:
    parts = []
    for m in msgs:
        parts.append(m.text)
        for call in m.tool_uses:
            parts.append(str(call.input))
        for result in m.tool_results:
            parts.append(result.text)
    return "\n".join(parts)


# -- report --------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=["overhead", "needles", "all"], default="all")
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1_000, 10_000])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--rounds", type=int, nargs="+", default=[1, 3, 10])
    args = parser.parse_args()
    print(f"Python {sys.version.split()[0]}, memdir from {Path(__file__).resolve().parents[1]}")
    if args.part in ("overhead", "all"):
        print(
            "\n| messages | check, no compaction (warm cache) ms | (cold cache) ms "
            "| full compaction ms | full µs / message |"
        )
        print("|---:|---:|---:|---:|---:|")
        for n, warm, cold, full in overhead(args.sizes, args.repeats):
            print(f"| {n:,} | {warm:.2f} | {cold:.2f} | {full:.1f} | {full * 1000 / n:.0f} |")
    if args.part in ("needles", "all"):
        kinds = ("identifier", "path", "decision", "pending request")
        rows = needle_survival(args.rounds)
        counts = {k: rows[0][1][k][0] for k in kinds}
        head = " | ".join(f"{k} ({counts[k]})" for k in kinds)
        print(f"\n| compactions | {head} | all: in context | all: reachable | request verbatim |")
        print("|---:|" + "---:|" * (len(kinds) + 3))
        for total, by_kind, verbatim in rows:
            n = sum(v[0] for v in by_kind.values())
            c = sum(v[1] for v in by_kind.values())
            r = sum(v[2] for v in by_kind.values())
            cells = " | ".join(str(by_kind[k][1]) for k in kinds)
            print(
                f"| {total} | {cells} | {c}/{n} ({c / n:.0%}) | {r}/{n} ({r / n:.0%}) "
                f"| {'yes' if verbatim else 'no'} |"
            )


if __name__ == "__main__":
    main()
