"""Calibrate and measure the token estimator against an exact tokenizer.

Usage::

    python benchmarks/tokens.py --fit          # print fitted weights for every profile
    python benchmarks/tokens.py                # error table + throughput (docs/benchmarks.md)

The corpus is generated from text already on the machine, deterministically:

* english  - docstrings of the Python standard library
* chinese  - half prose (zh_CN man pages, the vim tutor, GnuPG help, the systemd catalogue),
  half zh_CN gettext catalogue strings joined into paragraphs
* code     - windows of standard-library source
* json_en / json_zh - tool calls and tool results built from the pools above, serialised
  like a provider sees them (``ensure_ascii=False``)
* memory   - ledger bullets: 60 % English, 25 % Chinese, 15 % mixed
* other    - ja, ko, ru, de, fr, es catalogues (weights for other scripts)

Every *source* (a stdlib module, a catalogue, a man page) goes either to the calibration half
or to the evaluation half, by a hash of its name, so no evaluation text, nor anything from the
same file, is seen by the fit. Two more categories are evaluated but never fitted: natural
conversation turns read (not copied) from the third-party evaluation sets in
``/work/shared/bench`` - English from LoCoMo, Chinese from MemDaily - when they are present.
Needs the ``tokens`` extra (quicktok) and numpy.
"""

from __future__ import annotations

import argparse
import ast
import gettext
import gzip
import hashlib
import json
import math
import random
import re
import statistics
import sys
import sysconfig
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from memdir.tokens._tokenizers import FEATURES, PROFILES, EstimatorProfile, features, load_exact

CATEGORIES = ("english", "chinese", "code", "json_en", "json_zh", "memory", "other")
PER_CATEGORY = 600  # samples per category, half of them in each half
EXTERNAL = ("chat_en", "chat_zh")  # evaluation only
LOCALE = Path("/usr/share/locale")
BENCH = Path("/work/shared/bench")
ZH_PROSE = [
    *sorted(Path("/usr/share/man/zh_CN").glob("man*/*.gz")),
    Path("/usr/share/vim/vim90/tutor/tutor.zh_cn.utf-8"),
    Path("/usr/share/vim/vim90/tutor/tutor.zh.utf-8"),
    Path("/usr/share/gnupg/help.zh_CN.txt"),
    Path("/usr/lib/systemd/catalog/systemd.zh_CN.catalog"),
]
_GROFF_ESCAPE = re.compile(r"\\f(?:\(..|\[[^]]*\]|.)|\\\(..|\\[&|^]")


def _half(name: str) -> str:
    digest = hashlib.sha256(name.encode()).digest()
    return "calib" if digest[0] % 2 == 0 else "eval"


def _length(rng: random.Random) -> int:
    """Log-uniform sample length, 40..4,000 characters (short chat turns to long results)."""
    return int(math.exp(rng.uniform(math.log(40), math.log(4000))))


# -- sources --------------------------------------------------------------------------------


def _stdlib_files() -> list[Path]:
    root = Path(sysconfig.get_paths()["stdlib"])
    files = [
        p
        for p in sorted(root.glob("*.py")) + sorted(root.glob("*/*.py"))
        if "test" not in p.parts and "site-packages" not in p.parts and "idlelib" not in p.parts
    ]
    return files


def _docstrings(path: Path) -> list[str]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return []
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node)
            if doc and len(doc) >= 40 and doc.isascii():
                out.append(doc)
    return out


def _catalog(lang: str) -> dict[str, list[str]]:
    """msgstr values per catalogue of one language."""
    out: dict[str, list[str]] = {}
    folder = LOCALE / lang / "LC_MESSAGES"
    for mo in sorted(folder.glob("*.mo")):
        try:
            with mo.open("rb") as fh:
                cat = gettext.GNUTranslations(fh)._catalog  # type: ignore[attr-defined]
        except (OSError, ValueError, UnicodeDecodeError):
            continue
        texts = [
            v.strip()
            for k, v in cat.items()
            if k and isinstance(v, str) and len(v.strip()) >= 2 and v.strip() != k
        ]
        if texts:
            out[f"{lang}/{mo.name}"] = texts
    return out


def _paragraphs(path: Path) -> list[str]:
    """Prose paragraphs of a text file or a (gzipped) man page, markup removed."""
    try:
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError, gzip.BadGzipFile):
        return []
    lines = []
    for line in text.splitlines():
        if line.startswith((".", "'", "--")):
            lines.append("")
            continue
        line = _GROFF_ESCAPE.sub("", line).replace("\\-", "-").replace("\\e", "\\")
        lines.append(line)
    paragraphs = [p.strip() for p in "\n".join(lines).split("\n\n")]
    return [p + "\n" for p in paragraphs if len(p) >= 10]


def _sources() -> dict[str, dict[str, dict[str, list[str]]]]:
    """{half: {pool: {source_name: [texts]}}}."""
    halves: dict[str, dict[str, dict[str, list[str]]]] = {"calib": {}, "eval": {}}

    def put(pool: str, name: str, texts: list[str]) -> None:
        if texts:
            halves[_half(name)].setdefault(pool, {})[name] = texts

    for path in _stdlib_files():
        name = path.as_posix()
        put("docs", name, _docstrings(path))
        try:
            put("code", name, [path.read_text(encoding="utf-8")])
        except (UnicodeDecodeError, OSError):
            pass
    for name, texts in _catalog("zh_CN").items():
        han = [t for t in texts if sum("\u4e00" <= c <= "\u9fff" for c in t) >= len(t) * 0.3]
        put("zh", name, han)
    for path in ZH_PROSE:
        put("zh_prose", path.as_posix(), _paragraphs(path))
    for lang in ("ja", "ko", "ru", "de", "fr", "es"):
        for name, texts in _catalog(lang).items():
            put("other", name, texts)
    return halves


# -- sample generators ----------------------------------------------------------------------


class _Pools:
    def __init__(self, pools: dict[str, dict[str, list[str]]], rng: random.Random) -> None:
        self.pools = {k: list(v.values()) for k, v in pools.items()}
        self.rng = rng

    def pick(self, pool: str) -> list[str]:
        return self.rng.choice(self.pools[pool])

    def prose(self, pool: str, length: int, sep: str) -> str:
        source = self.pick(pool)
        start = self.rng.randrange(len(source))
        parts: list[str] = []
        size = 0
        i = start
        while size < length:
            piece = source[i % len(source)]
            parts.append(piece)
            size += len(piece) + len(sep)
            i += 1
            if i - start > len(source) and size > 20:
                break
        return sep.join(parts)[: max(length, 20)]

    def code(self, length: int) -> str:
        src = self.rng.choice(self.pick("code"))
        lines = src.splitlines(keepends=True)
        start = self.rng.randrange(max(1, len(lines) - 5))
        out: list[str] = []
        size = 0
        for line in lines[start:]:
            out.append(line)
            size += len(line)
            if size >= length:
                break
        return "".join(out)

    def english(self, length: int) -> str:
        return self.prose("docs", length, "\n\n")

    def chinese(self, length: int) -> str:
        pool = "zh_prose" if self.rng.random() < 0.5 else "zh"
        return self.prose(pool, max(20, length // 2), "")

    def other(self, length: int) -> str:
        return self.prose("other", length, " ")

    def memory(self, length: int) -> str:
        bullets = []
        size = 0
        while size < length:
            roll = self.rng.random()
            if roll < 0.6:
                body = self.english(self.rng.randint(40, 200)).replace("\n", " ")
            elif roll < 0.85:
                body = self.chinese(self.rng.randint(20, 120)).replace("\n", " ")
            else:
                body = (
                    self.english(self.rng.randint(30, 80)).replace("\n", " ")
                    + " "
                    + self.chinese(self.rng.randint(10, 60)).replace("\n", " ")
                )
            hh, mm = self.rng.randrange(24), self.rng.randrange(60)
            line = f"- {hh:02d}:{mm:02d} {body.strip()}"
            bullets.append(line)
            size += len(line) + 1
        return "\n".join(bullets)

    def tool_json(self, length: int, chinese: bool) -> str:
        text = self.chinese if chinese else self.english
        kind = self.rng.randrange(4)
        payload: object
        if kind == 0:
            payload = {
                "name": "write_file",
                "arguments": {"path": f"src/app/mod_{self.rng.randrange(999)}.py"},
            }
            payload["arguments"]["content"] = self.code(length)  # type: ignore[index]
        elif kind == 1:
            payload = {
                "name": "memory_search",
                "arguments": {"query": text(40)[:40], "max_results": self.rng.randint(3, 20)},
            }
        elif kind == 2:
            hits = []
            size = 0
            while size < length:
                content = text(self.rng.randint(30, 200))
                hits.append(
                    {
                        "path": f"memory/2026-{self.rng.randint(1, 12):02d}-"
                        f"{self.rng.randint(1, 28):02d}.md",
                        "line_number": self.rng.randint(1, 400),
                        "score": round(self.rng.uniform(0, 30), 3),
                        "content": content,
                    }
                )
                size += len(content) + 60
            payload = {"results": hits, "count": len(hits)}
        else:
            payload = {
                "id": f"call_{self.rng.getrandbits(64):016x}",
                "type": "function",
                "function": {
                    "name": "send_message",
                    "arguments": json.dumps(
                        {"to": "ops", "subject": text(60)[:60], "body": text(length)},
                        ensure_ascii=False,
                    ),
                },
            }
        indent = 2 if self.rng.random() < 0.3 else None
        return json.dumps(payload, ensure_ascii=False, indent=indent)

    def sample(self, category: str) -> str:
        length = _length(self.rng)
        return {
            "english": self.english,
            "chinese": self.chinese,
            "code": self.code,
            "json_en": lambda n: self.tool_json(n, chinese=False),
            "json_zh": lambda n: self.tool_json(n, chinese=True),
            "memory": self.memory,
            "other": self.other,
        }[category](length)


def _chat_samples(path: Path, rng: random.Random, count: int) -> list[str]:
    """Runs of consecutive conversation turns from a memret/1 file (read, never stored)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    turns = [
        [f"{d['speaker']}: {d['text']}" if d.get("speaker") else d["text"] for d in c["docs"]]
        for c in data["corpora"]
        if c["docs"]
    ]
    out = []
    for _ in range(count):
        conv = rng.choice(turns)
        start, length, parts = rng.randrange(len(conv)), _length(rng), []
        for turn in conv[start:]:
            parts.append(turn)
            if sum(map(len, parts)) >= length:
                break
        out.append("\n".join(parts))
    return out


def corpus(seed: int = 20261130) -> dict[str, dict[str, list[str]]]:
    """{half: {category: [texts]}}, deterministic for a given machine."""
    sources = _sources()
    out: dict[str, dict[str, list[str]]] = {}
    for half, pools in sources.items():
        gen = _Pools(pools, random.Random(f"{seed}-{half}"))
        out[half] = {c: [gen.sample(c) for _ in range(PER_CATEGORY // 2)] for c in CATEGORIES}
    rng = random.Random(f"{seed}-external")
    for category, path in (
        ("chat_en", BENCH / "locomo" / "memret.json"),
        ("chat_zh", BENCH / "memdaily" / "memret_traj_dev.json"),
    ):
        samples = _chat_samples(path, rng, PER_CATEGORY // 2)
        if samples:
            out["eval"][category] = samples
    return out


# -- fitting --------------------------------------------------------------------------------


def nnls(a: np.ndarray, b: np.ndarray, iters: int = 500) -> np.ndarray:
    """Lawson-Hanson non-negative least squares: argmin ||a x - b|| subject to x >= 0."""
    n = a.shape[1]
    x = np.zeros(n)
    passive = np.zeros(n, dtype=bool)
    w = a.T @ (b - a @ x)
    for _ in range(iters):
        if passive.all() or w[~passive].max(initial=-np.inf) <= 1e-10:
            break
        j = int(np.argmax(np.where(passive, -np.inf, w)))
        passive[j] = True
        while True:
            z = np.zeros(n)
            z[passive] = np.linalg.lstsq(a[:, passive], b, rcond=None)[0]
            if (z[passive] > 0).all():
                x = z
                break
            mask = passive & (z <= 0)
            alpha = np.min(x[mask] / (x[mask] - z[mask]))
            x = x + alpha * (z - x)
            passive &= x > 1e-12
        w = a.T @ (b - a @ x)
    return x


def fit(texts: list[str], truth: list[int]) -> dict[str, float]:
    """Weights minimising squared *relative* error; each category is weighted equally."""
    a = np.array([features(t) for t in texts], dtype=float)
    y = np.array(truth, dtype=float)
    keep = y > 0
    a, y = a[keep], y[keep]
    # Relative error: divide each row by its true count; bias of the L2 fit is removed by
    # iteratively reweighting towards an L1 (median-like) fit.
    weights = np.ones(len(y))
    x = np.zeros(a.shape[1])
    for _ in range(20):
        aw = a / y[:, None] * weights[:, None]
        bw = np.ones(len(y)) * weights
        x = nnls(aw, bw)
        resid = np.abs(a @ x / y - 1)
        weights = 1 / np.sqrt(np.maximum(resid, 0.02))
    return {name: round(float(v), 4) for name, v in zip(FEATURES, x, strict=True) if v > 1e-4}


# -- evaluation -----------------------------------------------------------------------------


def errors(estimate: Callable[[str], int], texts: list[str], truth: list[int]) -> list[float]:
    return [(estimate(t) - y) / y for t, y in zip(texts, truth, strict=True) if y > 0]


def summary(errs: list[float]) -> str:
    bias = 100 * statistics.fmean(errs)
    mae = 100 * statistics.fmean(abs(e) for e in errs)
    p95 = 100 * sorted(abs(e) for e in errs)[int(0.95 * (len(errs) - 1))]
    return f"{bias:+.1f} / {mae:.1f} / {p95:.1f}"


def _cjk(text: str) -> int:
    return sum(
        1
        for c in text
        if "\u3000" <= c <= "\u9fff" or "\uac00" <= c <= "\ud7af" or "\uff00" <= c <= "\uffef"
    )


BASELINES: dict[str, Callable[[str], int]] = {
    "chars/4": lambda t: math.ceil(len(t) / 4),
    "chars/2.5 (reference harness)": lambda t: math.ceil(len(t) / 2.5),
    "non-CJK/4 + CJK": lambda t: math.ceil((len(t) - _cjk(t)) / 4 + _cjk(t)),
}


def _median_seconds(fn: Callable[[], object], repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _throughput(data: dict[str, list[str]]) -> None:
    """Mchar/s per category and overall, each counter over the same texts, median of 5."""
    o200k = load_exact("o200k_base")
    rows: list[tuple[str, Callable[[str], int]]] = [
        ("memdir estimator", PROFILES["o200k_base"].estimate)
    ]
    if o200k is not None:
        rows.append(("quicktok o200k (exact)", o200k))
    rows.append(("chars/4", BASELINES["chars/4"]))
    cats = [*CATEGORIES, "all"]
    print("| counter | " + " | ".join(cats) + " |")
    print("|---" * (len(cats) + 1) + "|")
    for name, fn in rows:
        cells = []
        for cat in cats:
            texts = [t for c in CATEGORIES for t in data[c]] if cat == "all" else data[cat]
            seconds = _median_seconds(lambda fn=fn, texts=texts: [fn(t) for t in texts])
            cells.append(f"{sum(map(len, texts)) / seconds / 1e6:.1f}")
        print(f"| {name} | " + " | ".join(cells) + " |")


def _conversation(texts: list[str], n: int, rng: random.Random) -> list[Any]:
    """A tool-using conversation of ``n`` messages built from evaluation texts."""
    from memdir.messages import Msg, ToolUseBlock

    msgs: list[Any] = []
    while len(msgs) < n:
        msgs.append(Msg.user(rng.choice(texts)[:500]))
        call = ToolUseBlock(
            id=f"call_{len(msgs)}", name="memory_search", input={"query": rng.choice(texts)[:80]}
        )
        msgs.append(Msg.assistant(rng.choice(texts)[:300], tool_calls=[call]))
        msgs.append(Msg.tool_result(call.id, rng.choice(texts), name="memory_search"))
    return msgs[:n]


def _request_errors(data: dict[str, list[str]]) -> None:
    """Whole requests (40 messages with tool calls), estimator vs exact o200k accounting."""
    from memdir.tokens import EstimatingCounter, ExactCounter

    est, exact = EstimatingCounter(), ExactCounter()
    mixes = {
        "English + code + JSON": data["english"] + data["code"] + data["json_en"],
        "Chinese + JSON (zh)": data["chinese"] + data["json_zh"] + data.get("chat_zh", []),
        "all categories": [t for texts in data.values() for t in texts],
    }
    print("| conversation texts | requests | bias % / mean abs err % / p95 abs err % |")
    print("|---|---|---|")
    for label, texts in mixes.items():
        rng = random.Random(label)
        errs = []
        for _ in range(100):
            msgs = _conversation(texts, 40, rng)
            truth = exact.count_request(msgs)
            errs.append((est.count_request(msgs) - truth) / truth)
        print(f"| {label} | {len(errs)} | {summary(errs)} |")


def _conversation_timing(texts: list[str]) -> None:
    """Counting a 1,000-message request: cold, cached, one new message, anchored."""
    from memdir.messages import Msg
    from memdir.models import Usage
    from memdir.tokens import EstimatingCounter, ExactCounter, UsageAnchor

    msgs = _conversation(texts, 1000, random.Random(7))
    chars = sum(len(m.text) + sum(len(b.text) for b in m.tool_results) for m in msgs)
    system = "You are a helpful assistant with long-term memory.\n" * 40
    factories: list[tuple[str, Callable[[], Any]]] = [("estimator", EstimatingCounter)]
    if load_exact("o200k_base") is not None:
        factories.append(("exact o200k", ExactCounter))
    print(f"1,000 messages, {chars / 1e6:.2f} Mchar of text; median of 5, milliseconds\n")
    print("| counter | cold (empty cache) | cached | +1 new message | UsageAnchor +1 |")
    print("|---|---|---|---|---|")
    for name, factory in factories:
        cold = _median_seconds(lambda f=factory: f().count_request(msgs, system=system))
        counter = factory()
        counter.count_request(msgs, system=system)
        warm = _median_seconds(lambda c=counter: c.count_request(msgs, system=system))

        def one_more(c: Any = counter) -> None:
            c.count_request([*msgs, Msg.user("one more question")], system=system)

        plus_one = _median_seconds(one_more)
        anchor = UsageAnchor(counter)
        anchor.record(msgs, system=system, usage=Usage(input_tokens=250_000))
        anchored = _median_seconds(
            lambda a=anchor: a.estimate([*msgs, Msg.user("next")], system=system)
        )
        cells = [f"{1000 * t:.1f}" for t in (cold, warm, plus_one, anchored)]
        print(f"| {name} | " + " | ".join(cells) + " |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fit", action="store_true", help="print fitted weights and exit")
    args = parser.parse_args(argv)
    exact = {name: load_exact(name) for name in ("o200k_base", "cl100k_base")}
    if any(fn is None for fn in exact.values()):
        print("needs the exact tokenizer: pip install 'memdir[tokens]'", file=sys.stderr)
        return 2
    data = corpus()
    calib_texts = [t for c in CATEGORIES for t in data["calib"][c]]
    if args.fit:
        for name, fn in exact.items():
            assert fn is not None
            weights = fit(calib_texts, [fn(t) for t in calib_texts])
            print(f"{name} = {json.dumps(weights, indent=4)}")
        return 0

    print(
        "samples per category (calib/eval):",
        {c: (len(data["calib"][c]), len(data["eval"][c])) for c in CATEGORIES},
    )
    for name, fn in exact.items():
        assert fn is not None
        print(f"\n### error vs exact {name} (held-out half): bias % / mean |err| % / p95 |err| %\n")
        cats = list(data["eval"])
        print("| estimator | " + " | ".join(cats) + " |")
        print("|---" * (len(cats) + 1) + "|")
        truth = {c: [fn(t) for t in data["eval"][c]] for c in cats}
        rows: list[tuple[str, Callable[[str], int]]] = [
            (f"memdir estimator ({name} profile)", PROFILES[name].estimate),
            *BASELINES.items(),
        ]
        if name == "o200k_base":
            cl = exact["cl100k_base"]
            assert cl is not None
            rows.append(("exact cl100k_base", cl))
        for label, est in rows:
            cells = [summary(errors(est, data["eval"][c], truth[c])) for c in cats]
            print(f"| {label} | " + " | ".join(cells) + " |")
        # Same weights refitted on the evaluation half: how much is left on the table.
        eval_texts = [t for c in CATEGORIES for t in data["eval"][c]]
        oracle = EstimatorProfile(
            name="oracle", weights=fit(eval_texts, [fn(t) for t in eval_texts])
        )
        cells = [summary(errors(oracle.estimate, data["eval"][c], truth[c])) for c in cats]
        print("| (oracle: weights fitted on the eval half) | " + " | ".join(cells) + " |")
        ratio = {c: sum(len(t) for t in data["eval"][c]) / sum(truth[c]) for c in cats}
        print("\nchars per token:", {c: round(r, 2) for c, r in ratio.items()})

    texts = [t for c in CATEGORIES for t in data["eval"][c]]
    print(f"\n### text throughput, Mchar/s ({sum(map(len, texts)) / 1e6:.2f} Mchar)\n")
    _throughput(data["eval"])
    print("\n### whole requests: error vs exact o200k with the same message accounting\n")
    _request_errors(data["eval"])
    print("\n### whole-request counting time\n")
    _conversation_timing(texts)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
