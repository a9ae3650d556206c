"""Retrieval quality of ``MemoryIndex.search`` on a memret/1 file (offline, no LLM).

Follows the protocol of the shared benchmark README exactly:

1. one fresh workspace per corpus;
2. one daily file ``memory/YYYY-MM-DD.md`` per distinct doc date, docs in file order, one doc
   per bullet ``- HH:MM Speaker: text [image: caption]`` (missing parts omitted), and a
   ``## <session>`` heading before each session when a day holds several; a side map
   (file, line) -> doc id (ids, answers and questions never enter the files);
3. indexing through ``MemoryIndex.index_all_from_workspace()``;
4. ``search(question, limit=50)`` with product defaults, no query rewriting;
5. hits mapped to the doc ids of the lines they cover, in order, de-duplicated;
6. R@1/5/10, Hit@5, MRR (within 50), SessR@1/3, empty rate, p50/p95 latency, build time,
   overall and per category (LoCoMo: adversarial reported on its own); the session-level view
   (the doc list collapsed to sessions, as for SessR: SessHit@1, binary SessNDCG@5); for the
   queries that carry ``stale`` docs (BEAM's knowledge_update: the message with the
   superseded fact), the share whose first relevant doc ranks above the first stale one
   (``current>stale``; a stale doc not found counts as below).

Usage::

    python benchmarks/retrieval.py FILE.json [--json OUT] [--limit-corpora N] [--half 1|2]
        [--ablate F,...] [--set NAME=VALUE] [--embedder e5 [--embed-cache FILE]]

``--half 1`` / ``--half 2`` measures the first or the second half of the corpora only (a
parameter chosen on one half is checked on the other). ``--ablate`` switches ranking features
off (see ``memdir.index._rank.RankConfig``) to measure what each one contributes; ``--set``
changes one of its parameters. ``--embedder`` measures hybrid search: after indexing, every
line is embedded (``MemoryIndex.embed_pending``, timed separately) and searches fuse the
lexical and the vector ranking.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from memdir import MemoryIndex, Workspace
from memdir.embeddings import Embedder, embedder_from_string

LIMIT = 50
ADVERSARIAL = "adversarial"


def _bullet(doc: dict[str, Any]) -> str:
    parts = ["-"]
    if doc.get("time"):
        parts.append(str(doc["time"]))
    text = " ".join(str(doc.get("text") or "").split())
    if doc.get("speaker"):
        text = f"{doc['speaker']}: {text}"
    parts.append(text)
    if doc.get("caption"):
        parts.append(f"[image: {' '.join(str(doc['caption']).split())}]")
    return " ".join(parts)


def write_corpus(root: Path, docs: list[dict[str, Any]]) -> dict[tuple[str, int], str]:
    """Write the daily files of one corpus; return the (file, line) -> doc id map."""
    by_day: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for doc in docs:
        by_day[doc["date"]].append(doc)
    where: dict[tuple[str, int], str] = {}
    (root / "memory").mkdir(parents=True, exist_ok=True)
    for day, day_docs in by_day.items():
        rel = f"memory/{day}.md"
        sessions = list(dict.fromkeys(d.get("session") for d in day_docs))
        lines: list[str] = []
        current: object = object()
        for doc in day_docs:
            if len(sessions) > 1 and doc.get("session") != current:
                current = doc.get("session")
                if lines:
                    lines.append("")
                lines.append(f"## {current}")
            lines.append(_bullet(doc))
            where[(rel, len(lines))] = doc["id"]
        (root / rel).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return where


def load_memret(
    path: Path, *, limit_corpora: int | None = None, half: int | None = None
) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, list[dict[str, Any]]]]:
    """A memret/1 file: its data, its corpora (the first ``limit_corpora``; of those, the
    first or second ``half``), and its queries by corpus id."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if data.get("format") != "memret/1":
        raise SystemExit(f"{path}: not a memret/1 file")
    corpora = data["corpora"][:limit_corpora] if limit_corpora else data["corpora"]
    if half is not None:
        middle = (len(corpora) + 1) // 2
        corpora = corpora[:middle] if half == 1 else corpora[middle:]
    by_corpus: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for query in data["queries"]:
        by_corpus[query["corpus"]].append(query)
    return data, corpora, by_corpus


def sessions_of(docs: list[dict[str, Any]]) -> dict[str, str]:
    """Doc id -> its session (day and session name), for ``SessR@k``."""
    return {d["id"]: f"{d['date']}/{d.get('session')}" for d in docs}


def ranked_docs(hits: list[Any], where: dict[tuple[str, int], str]) -> list[str]:
    """The docs the hits cover, in hit order, each once (``where``: (path, line) -> doc)."""
    ranked: list[str] = []
    for hit in hits:
        for line in range(hit.line_number, hit.line_end + 1):
            doc = where.get((hit.path, line))
            if doc is not None and doc not in ranked:
                ranked.append(doc)
    return ranked


def current_above_stale(ranked: list[str], relevant: set[str], stale: set[str]) -> bool:
    """Whether the first relevant doc ranks above the first stale one (a doc not found ranks
    below every found one; neither found: not above)."""
    where = {doc: i for i, doc in reversed(list(enumerate(ranked)))}
    first = min((where[d] for d in relevant if d in where), default=None)
    if first is None:
        return False
    return first < min((where[d] for d in stale if d in where), default=len(ranked))


def _ndcg(ranked: list[str], wanted: set[str], k: int) -> float:
    """Binary NDCG@k of a ranked list of units against the wanted ones."""
    dcg = sum(1 / math.log2(i + 2) for i, unit in enumerate(ranked[:k]) if unit in wanted)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(k, len(wanted))))
    return dcg / ideal if ideal else 0.0


def _recall(ranked: list[str], relevant: set[str], k: int) -> float:
    return len(relevant.intersection(ranked[:k])) / len(relevant)


def score_query(
    ranked: list[str], relevant: set[str], session_of: dict[str, str]
) -> dict[str, float]:
    """Metrics of one ranked doc list against the relevant doc ids."""
    first = next((i for i, doc in enumerate(ranked[:LIMIT]) if doc in relevant), None)
    sessions = list(dict.fromkeys(session_of[doc] for doc in ranked))
    wanted = {session_of[doc] for doc in relevant if doc in session_of}
    return {
        "R@1": _recall(ranked, relevant, 1),
        "R@5": _recall(ranked, relevant, 5),
        "R@10": _recall(ranked, relevant, 10),
        "Hit@5": float(first is not None and first < 5),
        "MRR": 0.0 if first is None else 1.0 / (first + 1),
        "SessR@1": len(wanted.intersection(sessions[:1])) / len(wanted) if wanted else 0.0,
        "SessR@3": len(wanted.intersection(sessions[:3])) / len(wanted) if wanted else 0.0,
        "SessHit@1": float(bool(sessions[:1]) and sessions[0] in wanted),
        "SessNDCG@5": _ndcg(sessions, wanted, 5),
        "empty": float(not ranked),
    }


METRICS = (
    "R@1",
    "R@5",
    "R@10",
    "Hit@5",
    "MRR",
    "SessR@1",
    "SessR@3",
    "SessHit@1",
    "SessNDCG@5",
    "empty",
)


def _summary(rows: list[dict[str, Any]]) -> dict[str, float]:
    out = {m: statistics.fmean(r["metrics"][m] for r in rows) for m in METRICS}
    lat = sorted(r["ms"] for r in rows)
    out["p50_ms"] = lat[len(lat) // 2]
    out["p95_ms"] = lat[min(len(lat) - 1, int(len(lat) * 0.95))]
    out["n"] = len(rows)
    judged = [r["current_above_stale"] for r in rows if "current_above_stale" in r]
    if judged:
        out["current>stale"] = statistics.fmean(judged)
        out["n_stale"] = len(judged)
    return out


def run(
    path: Path,
    *,
    limit_corpora: int | None = None,
    half: int | None = None,
    k: int = LIMIT,
    embedder: Embedder | None = None,
) -> dict[str, Any]:
    """Run the protocol on one memret/1 file (``half``: see :func:`load_memret`); returns
    per-query rows and summaries."""
    data, corpora, queries_by_corpus = load_memret(path, limit_corpora=limit_corpora, half=half)
    rows: list[dict[str, Any]] = []
    skipped = 0
    build_s = embed_s = 0.0
    with tempfile.TemporaryDirectory(prefix="memdir-retrieval-") as tmp:
        for number, corpus in enumerate(corpora):
            root = Path(tmp) / f"c{number}"
            where = write_corpus(root, corpus["docs"])
            session_of = sessions_of(corpus["docs"])
            ws = Workspace(root, tz="UTC")
            with MemoryIndex(ws, embedder=embedder or False) as index:
                started = time.perf_counter()
                index.index_all_from_workspace()
                build_s += time.perf_counter() - started
                if embedder is not None:
                    started = time.perf_counter()
                    index.embed_pending()
                    embed_s += time.perf_counter() - started
                for query in queries_by_corpus.get(corpus["id"], []):
                    relevant = set(query.get("relevant") or [])
                    if not relevant:
                        skipped += 1
                        continue
                    started = time.perf_counter()
                    hits = index.search(query["text"], limit=k)
                    ms = (time.perf_counter() - started) * 1000
                    ranked = ranked_docs(hits, where)
                    row = {
                        "id": query["id"],
                        "category": query.get("category") or "all",
                        "ms": ms,
                        "ranked": ranked[:LIMIT],
                        "relevant": sorted(relevant),
                        "metrics": score_query(ranked, relevant, session_of),
                    }
                    if query.get("stale"):
                        stale = set(query["stale"])
                        row["current_above_stale"] = current_above_stale(ranked, relevant, stale)
                    rows.append(row)
    answerable = [r for r in rows if r["category"] != ADVERSARIAL]
    summaries: dict[str, dict[str, float]] = {}
    if answerable:
        summaries["overall" if len(answerable) == len(rows) else "answerable"] = _summary(
            answerable
        )
    for category in sorted({r["category"] for r in rows}):
        summaries[category] = _summary([r for r in rows if r["category"] == category])
    return {
        "file": str(path),
        "dataset": data.get("dataset"),
        "corpora": len(corpora),
        "queries": len(rows),
        "skipped_without_relevant": skipped,
        "build_s": build_s,
        "embedder": None if embedder is None else embedder.name,
        "embed_s": embed_s,
        "summaries": summaries,
        "rows": rows,
    }


def _print(result: dict[str, Any]) -> None:
    print(
        f"{result['dataset']}: {result['corpora']} corpora, {result['queries']} queries "
        f"({result['skipped_without_relevant']} without relevant docs skipped), "
        f"index build {result['build_s']:.2f} s"
        + (
            f", embedding {result['embed_s']:.1f} s ({result['embedder']})"
            if result["embedder"]
            else ""
        )
    )
    head = f"{'group':<18}{'n':>6}" + "".join(f"{m:>9}" for m in METRICS) + "   p50ms  p95ms"
    print(head)
    for name, s in result["summaries"].items():
        cells = "".join(f"{s[m]:>9.3f}" for m in METRICS)
        print(f"{name:<18}{int(s['n']):>6}{cells}  {s['p50_ms']:6.2f} {s['p95_ms']:6.2f}")
    for name, s in result["summaries"].items():
        if "current>stale" in s:
            print(
                f"{name}: first relevant above first stale in {s['current>stale']:.3f}"
                f" of {int(s['n_stale'])} queries with a stale doc"
            )


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", type=Path, help="a memret/1 JSON file")
    parser.add_argument("--json", type=Path, help="write per-query results here")
    parser.add_argument(
        "--k", type=int, default=LIMIT, help=f"results asked per query (default {LIMIT})"
    )
    parser.add_argument("--limit-corpora", type=int, help="only the first N corpora")
    parser.add_argument(
        "--half", type=int, choices=(1, 2), help="only the first or the second half of them"
    )
    parser.add_argument("--embedder", help="hybrid search with this embedder (e.g. e5)")
    parser.add_argument(
        "--embed-cache", type=Path, help="keep the embedder's vectors in this file between runs"
    )
    parser.add_argument("--ablate", default="", help="ranking features to switch off (comma list)")
    parser.add_argument(
        "--set", action="append", default=[], metavar="NAME=VALUE", help="a ranking parameter"
    )
    args = parser.parse_args(argv)
    if args.ablate or args.set:
        from memdir.index import _rank

        changes: dict[str, Any] = {n.strip(): False for n in args.ablate.split(",") if n.strip()}
        fields = {f.name: f for f in dataclasses.fields(_rank.RankConfig)}
        for item in args.set:
            name, _, value = item.partition("=")
            if name not in fields:
                parser.error(f"unknown ranking parameter: {name}")
            kind = type(getattr(_rank.DEFAULT, name))
            if kind is bool:
                if value.lower() not in ("true", "false", "1", "0"):
                    parser.error(f"{name} is true or false, not {value!r}")
                changes[name] = value.lower() in ("true", "1")
            else:
                changes[name] = kind(value)
        unknown = set(changes) - set(fields)
        if unknown:
            parser.error(f"unknown ranking features: {', '.join(sorted(unknown))}")
        _rank.DEFAULT = dataclasses.replace(_rank.DEFAULT, **changes)
        print(f"ranking: {_rank.DEFAULT}")
    embedder = embedder_from_string(args.embedder) if args.embedder else None
    if embedder is not None and args.embed_cache:
        from _embed_cache import CachedEmbedder

        embedder = CachedEmbedder(embedder, args.embed_cache)
    result = run(
        args.file, limit_corpora=args.limit_corpora, half=args.half, k=args.k, embedder=embedder
    )
    _print(result)
    if args.json:
        args.json.write_text(json.dumps(result, ensure_ascii=False, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
