"""Result records and the markdown report of the scale benchmark."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any

__all__ = ["WHOLE_LINE", "EngineResult", "QueryRecord", "SizeResult", "markdown", "p50", "p99"]

WHOLE_LINE = 0
"""Bucket (in place of a term count) of the queries that are the whole text of a line."""

# Targets: search latency over 2-5-term queries, per corpus size; the rest is stated at 1M lines.
_SEARCH_TARGETS = ((100_000, 3.0, 30.0), (1_000_000, 10.0, 100.0))
BUILD_TARGET_LINES_PER_S = 40_000
APPEND_TARGET_MS = 10.0
REWRITE_TARGET_MS = 100.0

REINDEX_OPS = (
    ("append10_index_file", "append 10 → `index_file`"),
    ("append10_refresh", "append 10 → `refresh()`"),
    ("rewrite_index_file", "rewrite → `index_file`"),
    ("rewrite_refresh", "rewrite → `refresh()`"),
    ("noop_refresh", "no-op `refresh()`"),
)


def p50(samples: list[float]) -> float:
    """Median (NaN when empty)."""
    return statistics.median(samples) if samples else math.nan


def p99(samples: list[float]) -> float:
    """99th percentile, nearest rank (NaN when empty)."""
    if not samples:
        return math.nan
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(0.99 * len(ordered)) - 1)]


@dataclass(slots=True, kw_only=True)
class EngineResult:
    """Everything measured for one engine at one corpus size."""

    name: str
    build_s: float | None = None
    rows: int = 0
    size_bytes: int = 0
    latency_ms: dict[int, list[float]] = field(default_factory=dict)
    recall: dict[int, list[float]] = field(default_factory=dict)
    reindex_ms: dict[str, list[float]] = field(default_factory=dict)

    def pooled(self, counts: range) -> list[float]:
        """Latencies of every query whose term count is in ``counts``."""
        return [ms for k in counts for ms in self.latency_ms.get(k, [])]


@dataclass(slots=True, kw_only=True)
class QueryRecord:
    """One query, its truth size (capped at 10) and what each engine did with it."""

    text: str
    kind: str
    terms: int
    truth10: int
    ms: dict[str, float] = field(default_factory=dict)
    recall: dict[str, float] = field(default_factory=dict)


@dataclass(slots=True, kw_only=True)
class SizeResult:
    """One corpus size."""

    lines: int
    files: int
    corpus_bytes: int
    load_start: tuple[float, float, float]
    load_end: tuple[float, float, float] = (0.0, 0.0, 0.0)
    engines: list[EngineResult] = field(default_factory=list)
    queries: list[QueryRecord] = field(default_factory=list)
    checks: dict[str, Any] = field(default_factory=dict)


def _ms(value: float) -> str:
    if math.isnan(value):
        return "–"
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def _pair(samples: list[float]) -> str:
    return f"{_ms(p50(samples))} / {_ms(p99(samples))}" if samples else "–"


def _load(load: tuple[float, float, float]) -> str:
    return " ".join(f"{x:.2f}" for x in load)


def _search_target(lines: int) -> tuple[float, float]:
    best = min(_SEARCH_TARGETS, key=lambda t: abs(math.log(lines / t[0])))
    return best[1], best[2]


def _verdict(ok: bool) -> str:
    return "✔" if ok else "✘"


def _size_section(size: SizeResult, max_terms: int) -> list[str]:
    out = [
        f"### {size.lines:,} lines ({size.files} files, {size.corpus_bytes / 1e6:.1f} MB)",
        "",
        f"Load average (1/5/15 min): start {_load(size.load_start)}, end {_load(size.load_end)}.",
        "",
        "| engine | build s | lines/s | DB MB | "
        + " | ".join(f"{label} ms" for _, label in REINDEX_OPS)
        + " |",
        "|---" * (4 + len(REINDEX_OPS)) + "|",
    ]
    for eng in size.engines:
        build = f"{eng.build_s:.2f} | {size.lines / eng.build_s:,.0f}" if eng.build_s else "– | –"
        db = f"{eng.size_bytes / 1e6:.1f}" if eng.size_bytes else "–"
        cells = [_ms(p50(eng.reindex_ms.get(op, []))) for op, _ in REINDEX_OPS]
        out.append(f"| {eng.name} | {build} | {db} | " + " | ".join(cells) + " |")
    terms = range(1, max_terms + 1)
    buckets = [*terms, WHOLE_LINE]
    out += [
        "",
        "Search latency, top 10, p50 / p99 ms:",
        "",
        "| engine | "
        + " | ".join(f"{k} term{'s' if k > 1 else ''}" for k in terms)
        + " | 2–5 terms | whole line | queries |",
        "|---" * (len(terms) + 4) + "|",
    ]
    for eng in size.engines:
        cells = [_pair(eng.latency_ms.get(k, [])) for k in terms]
        out.append(
            f"| {eng.name} | "
            + " | ".join(cells)
            + f" | {_pair(eng.pooled(range(2, 6)))} | {_pair(eng.latency_ms.get(WHOLE_LINE, []))}"
            + f" | {len(eng.pooled(buckets))} |"
        )
    out += [
        "",
        "Recall sanity check: mean share of the top 10 that contains every query term, out of "
        "min(10, lines containing every term); a whole-line query's one term is its text:",
        "",
        "| engine | "
        + " | ".join(str(k) for k in terms)
        + " | 1–5 terms | whole line | queries with 0 |",
        "|---" * (len(terms) + 4) + "|",
    ]
    for eng in size.engines:
        cells = [_mean(eng.recall.get(k, [])) for k in buckets]
        pooled = [r for k in terms for r in eng.recall.get(k, [])]
        zero = sum(1 for k in buckets for r in eng.recall.get(k, []) if r == 0)
        cells.insert(len(terms), _mean(pooled))
        out.append(f"| {eng.name} | " + " | ".join(cells) + f" | {zero} |")
    return out


def _mean(values: list[float]) -> str:
    return f"{statistics.fmean(values):.2f}" if values else "–"


def _targets(size: SizeResult) -> list[str]:
    eng = next((e for e in size.engines if e.name == "memdir"), None)
    if eng is None:
        return []
    want50, want99 = _search_target(size.lines)
    pooled = eng.pooled(range(2, 6))
    rate = size.lines / eng.build_s if eng.build_s else 0.0
    append = p50(eng.reindex_ms.get("append10_index_file", []))
    rewrite = p50(eng.reindex_ms.get("rewrite_index_file", []))
    rows = [
        ("search p50, 2–5 terms", f"≤ {want50:g} ms", _ms(p50(pooled)), p50(pooled) <= want50),
        ("search p99, 2–5 terms", f"≤ {want99:g} ms", _ms(p99(pooled)), p99(pooled) <= want99),
        (
            "full build",
            f"≥ {BUILD_TARGET_LINES_PER_S:,} lines/s (at 1M)",
            f"{rate:,.0f}",
            rate >= BUILD_TARGET_LINES_PER_S,
        ),
        (
            "append 10 lines → re-index",
            f"≤ {APPEND_TARGET_MS:g} ms (at 1M)",
            _ms(append),
            append <= APPEND_TARGET_MS,
        ),
        (
            "rewrite 2,000 lines → re-index",
            f"≤ {REWRITE_TARGET_MS:g} ms",
            _ms(rewrite),
            rewrite <= REWRITE_TARGET_MS,
        ),
    ]
    out = [
        "",
        "memdir against the targets:",
        "",
        "| metric | target | measured | |",
        "|---|---|---|---|",
    ]
    out += [f"| {m} | {t} | {v} | {_verdict(ok)} |" for m, t, v, ok in rows]
    return out


def _slowest(size: SizeResult, count: int = 8) -> list[str]:
    ranked = sorted(size.queries, key=lambda q: q.ms.get("memdir", 0.0), reverse=True)[:count]
    if not ranked:
        return []
    out = ["", "Slowest memdir queries:", "", "| ms | kind | terms | query |", "|---|---|---|---|"]
    for q in ranked:
        text = q.text if len(q.text) <= 60 else q.text[:57] + "…"
        terms = "line" if q.terms == WHOLE_LINE else str(q.terms)
        out.append(f"| {_ms(q.ms['memdir'])} | {q.kind} | {terms} | `{text}` |")
    return out


def markdown(sizes: list[SizeResult], *, header: list[str], max_terms: int) -> str:
    """The whole report as markdown."""
    out = list(header)
    for size in sizes:
        out.append("")
        out += _size_section(size, max_terms)
        out += _targets(size)
        out += _slowest(size)
        if size.checks:
            out += ["", "Checks: " + "; ".join(f"{k} = {v}" for k, v in size.checks.items()) + "."]
    return "\n".join(out) + "\n"
