"""Secret masking: throughput of ``memdir.redact``, and what masking adds to a compaction.

Usage::

    python benchmarks/redact.py                         # Markdown on stdout
    python benchmarks/redact.py --repeats 15 --messages 1000

**Throughput.** Generated texts of about 80,000 characters each, without secrets: service logs,
Python code, English prose about the work, and Chinese prose; plus the logs with one secret of
each built-in kind every 2,000 characters. Each is masked by :func:`memdir.redact.redact` and by
the same built-in patterns with their gates turned off (each pattern copied with a flag that
changes nothing, so no gate applies): the two are timed side by side in one run, and their
outputs compared.

**Compaction.** The whole compaction ladder of ``benchmarks/compaction.py`` on a generated
conversation over its trigger, in a fresh workspace each time, with the session log masked
(``CompactionConfig()``'s default) and unmasked (``redactor=None``), alternating.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import random
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from memdir.compaction import CompactionConfig, ConversationCompactor
from memdir.redact import DEFAULT_PATTERNS, RedactionPattern, Redactor, redact
from memdir.testing import FunctionModel
from memdir.tokens import EstimatingCounter
from memdir.workspace import Workspace

sys.path.insert(0, str(Path(__file__).parent))
from compaction import SUMMARY, conversation

SIZE = 80_000
SECRETS = [
    "sk-proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z",
    "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8",
    "AKIA" + "IOSFODNN7EXAMPLE",
    "Authorization: Bearer abcDEF123456ghiJKL789",
    "postgres://app:s3cr3t-pw@db.local:5432/x",
    "password=hunter2",
]


def _fill(line: Callable[[random.Random, int], str]) -> str:
    rng = random.Random(5)
    out: list[str] = []
    size = i = 0
    while size < SIZE:
        text = line(rng, i)
        out.append(text)
        size += len(text) + 1
        i += 1
    return "\n".join(out)


def texts() -> dict[str, str]:
    """The generated texts, by name."""
    words = ["deploy", "queue", "worker", "retry", "cache", "schema", "index", "latency"]
    logs = _fill(
        lambda r, i: (
            f"2026-11-30T09:{i % 60:02d}:00Z INFO worker={r.randint(1, 9)} "
            f"path=/api/v1/items/{r.randint(1, 999)} status=200 took={r.randint(1, 90)}ms"
        )
    )
    code = _fill(
        lambda r, i: (
            f"    def handle_{i}(self, request, retries={r.randint(1, 5)}):  "
            f"return self.{r.choice(words)}.get(request.id, None)"
        )
    )
    prose = _fill(
        lambda r, i: (
            " ".join(r.choice(words) for _ in range(12)).capitalize()
            + " was discussed and the team agreed on the next step."
        )
    )
    chinese = _fill(
        lambda r, i: (
            f"我们决定在第{i}步使用缓存，并在上海区域部署服务，延迟约{r.randint(1, 90)}毫秒。"
        )
    )
    secrets = "\n".join(
        line + (f" {SECRETS[i % len(SECRETS)]}" if i % 20 == 0 else "")
        for i, line in enumerate(logs.splitlines())
    )
    return {"logs": logs, "code": code, "prose": prose, "chinese": chinese, "logs+secrets": secrets}


def _median_ms(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def throughput(repeats: int) -> list[tuple[str, int, float, float]]:
    """``(text, characters, gated ms, ungated ms)`` per generated text."""
    ungated = Redactor(
        [
            RedactionPattern(name=p.name, regex=p.regex, group=p.group, flags=p.flags | re.UNICODE)
            for p in DEFAULT_PATTERNS
        ]
    )
    rows = []
    for name, text in texts().items():
        assert redact(text) == ungated.redact(text), name
        gated = _median_ms(partial(redact, text), repeats)
        slow = _median_ms(partial(ungated.redact, text), repeats)
        rows.append((name, len(text), gated, slow))
    return rows


def compaction(messages: int, repeats: int) -> tuple[float, float]:
    """Median ms of a full compaction with the session log masked and unmasked."""
    model = FunctionModel(lambda call: SUMMARY)
    msgs = conversation(messages)
    counter = EstimatingCounter(cache_size=100_000)

    def run(masked: bool) -> float:
        config = CompactionConfig(trigger_messages=50, keep_messages=20)
        if not masked:
            config = dataclasses.replace(config, redactor=None)
        with tempfile.TemporaryDirectory() as tmp:
            comp = ConversationCompactor(model, Workspace(tmp), config, token_counter=counter)
            t0 = time.perf_counter()
            result = asyncio.run(comp.compact_if_needed(msgs, session_id="b"))
            assert result is not None
            return (time.perf_counter() - t0) * 1000

    run(True)  # warm the token counter's cache
    masked: list[float] = []
    raw: list[float] = []
    for _ in range(repeats):
        masked.append(run(True))
        raw.append(run(False))
    return statistics.median(masked), statistics.median(raw)


def main() -> None:
    """Print both tables as Markdown."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--messages", type=int, default=1_000)
    args = parser.parse_args()
    print("| text | characters | redact ms | without gates ms | ratio | MB/s |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, size, gated, slow in throughput(args.repeats):
        mbs = size / gated / 1_000
        print(f"| {name} | {size:,} | {gated:.2f} | {slow:.2f} | ×{slow / gated:.1f} | {mbs:.0f} |")
    masked, raw = compaction(args.messages, max(3, args.repeats // 3))
    print()
    print(f"| full compaction, {args.messages:,} messages | ms |")
    print("|---|---:|")
    print(f"| session log masked (default) | {masked:.1f} |")
    print(f"| unmasked (`redactor=None`) | {raw:.1f} |")


if __name__ == "__main__":
    main()
