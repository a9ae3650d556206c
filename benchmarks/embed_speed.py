"""Embedding throughput of the bundled e5 embedder on long messages, as ``embed_pending`` runs it.

Messages of a memret/1 file (default: BEAM's long coding chats) are cut into passages
(``memdir.index._passages``) and embedded in batches of ``--batch`` passages, like
``MemoryIndex.embed_pending``. Reported: messages (lines), characters and tokens per second
of wall time and of CPU time (the machine may be shared: CPU time shows what the work costs),
and the load average before and after.

The engine's thread count is fixed for a process when it loads, so each setting is a run::

    MEMDIR_EMBED_THREADS=2 python benchmarks/embed_speed.py [FILE] [--messages 60]
        [--passage-tokens 256] [--corpus 0]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from memdir.embeddings import E5_PASSAGE_TOKENS, E5Embedder, document_text
from memdir.index._passages import passages_of

BEAM = Path("/work/shared/bench/beam/memret_100k.json")


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", type=Path, nargs="?", default=BEAM, help="a memret/1 file")
    parser.add_argument("--corpus", type=int, default=0, help="which corpus (index)")
    parser.add_argument("--messages", type=int, default=60, help="its first N messages")
    parser.add_argument("--passage-tokens", type=int, default=E5_PASSAGE_TOKENS)
    parser.add_argument("--batch", type=int, default=32, help="passages per embedder call")
    args = parser.parse_args(argv)
    data = json.loads(args.file.read_text(encoding="utf-8"))
    docs = data["corpora"][args.corpus]["docs"][: args.messages]
    texts = [document_text(" ".join(str(doc["text"]).split())) for doc in docs]
    load = os.getloadavg()[0]
    embedder = E5Embedder(passage_tokens=args.passage_tokens)
    started = time.perf_counter()
    passages = [p for text in texts for p in passages_of(embedder, text)]
    split_s = time.perf_counter() - started
    tokens = sum(embedder.count_tokens(p) for p in passages)
    wall, cpu = time.perf_counter(), time.process_time()
    for i in range(0, len(passages), args.batch):
        embedder.embed_documents(passages[i : i + args.batch])
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    chars = sum(map(len, texts))
    print(
        f"{len(texts)} messages, {chars:,} chars, {len(passages)} passages of <= "
        f"{args.passage_tokens} tokens ({tokens:,} tokens); split in {split_s:.1f} s; "
        f"threads {embedder.num_threads}; load average {load:.1f} -> {os.getloadavg()[0]:.1f}"
    )
    for name, seconds in (("wall", wall), ("cpu", cpu)):
        print(
            f"  per {name} second ({seconds:.1f} s): {len(texts) / seconds:.2f} lines, "
            f"{chars / seconds:,.0f} chars, {tokens / seconds:,.0f} tokens"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
