"""Secret masking: what is caught, what is lost, how fast — old and new redactor in one run.

Usage::

    python benchmarks/redact.py                          # Markdown on stdout
    python benchmarks/redact.py --part accuracy --misses dev  # and what that half missed
    python benchmarks/redact.py --old-commit 20bb18a --repeats 15 --messages 1000

**Accuracy.** The labelled corpus of ``benchmarks/_redact_corpus.py``, both halves (``dev``,
which the rules were checked against, and ``held-out``, which they were not): fake secrets in
119 formats, 2,400 benign lines per half. A secret counts as *caught* when none of its labelled
substrings survives. A benign line is a *false positive* when masking changed it; *text lost*
counts the characters of non-secret text that did not survive, in benign lines and around the
secrets. The old redactor is ``src/memdir/redact.py`` as of ``--old-commit``, loaded from git
into a temporary module. When ``detect_secrets`` (Yelp) is importable it is scored too, on the
same lines, with its default plugins and filters (a line is masked by replacing every secret
value it reports).

**Throughput.** Every corpus line masked one call at a time (lines/s), and the whole corpus as
one text; then generated texts of about 80,000 characters without secrets (logs, code, prose,
Chinese) and the logs with a secret every 2,000 characters.

**Compaction.** The whole compaction ladder of ``benchmarks/compaction.py`` on a generated
conversation over its trigger, in a fresh workspace each time, with the session log masked
(``CompactionConfig()``'s default), masked by the old redactor, and unmasked
(``redactor=None``), alternating.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import difflib
import importlib.util
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from types import ModuleType

from memdir.compaction import CompactionConfig, ConversationCompactor
from memdir.redact import redact
from memdir.testing import FunctionModel
from memdir.tokens import EstimatingCounter
from memdir.workspace import Workspace

sys.path.insert(0, str(Path(__file__).parent))
from _redact_corpus import SPLITS, Item, corpus
from compaction import SUMMARY, _median_ms, conversation

ROOT = Path(__file__).resolve().parent.parent
OLD_COMMIT = "20bb18a"  # the last commit with the hand-written list in src/memdir/redact.py
Mask = Callable[[str], str]


def load_old(commit: str) -> ModuleType:
    """``memdir.redact`` as it was at ``commit``, as a separate module."""
    source = subprocess.run(
        ["git", "show", f"{commit}:src/memdir/redact.py"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False, encoding="utf-8") as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location("_memdir_redact_old", f.name)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    Path(f.name).unlink()
    return module


def detect_secrets_masker() -> Mask | None:
    """Yelp's detect-secrets as a masker, or ``None`` when it is not installed."""
    try:
        from detect_secrets.core.scan import _process_line_based_plugins, get_filters
        from detect_secrets.settings import default_settings, get_settings
    except ImportError:
        return None
    settings = default_settings()  # every plugin, the default filters
    settings.__enter__()  # kept open (and referenced) for the whole run
    # The text is not a file on disk: the filter that drops missing files must not run.
    get_settings().disable_filters("detect_secrets.filters.common.is_invalid_file")
    get_filters.cache_clear()

    def mask(text: str, _settings: object = settings) -> str:
        lines = text.split("\n")
        found = _process_line_based_plugins(list(enumerate(lines, 1)), "notes.txt")
        for secret in found:
            value = secret.secret_value
            if value:
                text = text.replace(value, "[REDACTED:detect_secrets]")
        return text

    return mask


# -- accuracy ------------------------------------------------------------------------------


def _lost(original: str, masked: str, keep_out: list[tuple[int, int]]) -> int:
    """Characters of ``original`` outside ``keep_out`` that are not in ``masked``."""
    lost = 0
    matcher = difflib.SequenceMatcher(None, original, masked, autojunk=False)
    for op, i1, i2, _j1, _j2 in matcher.get_opcodes():
        if op in ("delete", "replace"):
            lost += sum(1 for i in range(i1, i2) if not any(a <= i < b for a, b in keep_out))
    return lost


@dataclasses.dataclass
class Score:
    caught: int = 0
    secrets: int = 0
    formats_missed: set[str] = dataclasses.field(default_factory=set)
    benign_changed: int = 0
    benign: int = 0
    lost_benign: int = 0
    lost_around: int = 0
    misses: list[str] = dataclasses.field(default_factory=list)
    false_positives: list[str] = dataclasses.field(default_factory=list)


def score(mask: Mask, secrets: list[Item], benign: list[Item]) -> Score:
    """Detection and false positives of ``mask`` on one half of the corpus."""
    out = Score()
    for item in secrets:
        masked = mask(item.text)
        out.secrets += 1
        if any(s in masked for s in item.secrets):
            out.formats_missed.add(item.format)
            out.misses.append(f"{item.format}: {item.text!r} -> {masked!r}")
        else:
            out.caught += 1
        spans = [(i, i + len(s)) for s in item.secrets for i in _find_all(item.text, s)]
        out.lost_around += _lost(item.text, masked, spans)
    for item in benign:
        masked = mask(item.text)
        out.benign += 1
        if masked != item.text:
            out.benign_changed += 1
            out.lost_benign += _lost(item.text, masked, [])
            out.false_positives.append(f"{item.text!r} -> {masked!r}")
    return out


def _find_all(text: str, sub: str) -> list[int]:
    found, at = [], text.find(sub)
    while at >= 0:
        found.append(at)
        at = text.find(sub, at + 1)
    return found


def accuracy(maskers: dict[str, Mask], show: str | None) -> None:
    print("| redactor | half | secrets caught | formats with a miss | benign lines changed |"
          " text lost: benign / around secrets (chars) |")  # fmt: skip
    print("|---|---|---:|---:|---:|---:|")
    details: list[str] = []
    for split in SPLITS:
        secrets, benign = corpus(split)
        n_formats = len({i.format for i in secrets})
        for name, mask in maskers.items():
            s = score(mask, secrets, benign)
            print(
                f"| {name} | {split} | {s.caught}/{s.secrets} ({100 * s.caught / s.secrets:.1f} %)"
                f" | {len(s.formats_missed)} of {n_formats} | {s.benign_changed}/{s.benign}"
                f" ({100 * s.benign_changed / s.benign:.1f} %) | {s.lost_benign:,} / "
                f"{s.lost_around:,} |"
            )
            if show == split and name == "new":
                details.append(f"\n### {name}, {split}: misses\n")
                details += [f"    {m}" for m in s.misses]
                details.append(f"\n### {name}, {split}: false positives\n")
                details += [f"    {m}" for m in sorted(set(s.false_positives))]
    print("\n".join(details))


# -- speed -----------------------------------------------------------------------------------


def lines_per_second(maskers: dict[str, Mask], repeats: int) -> None:
    lines = [item.text for split in SPLITS for part in corpus(split) for item in part]
    joined = "\n".join(lines)

    def each(mask: Mask) -> None:
        for line in lines:
            mask(line)

    print(f"| redactor | {len(lines):,} lines, one call each: lines/s |"
          f" as one text ({len(joined):,} chars): lines/s |")  # fmt: skip
    print("|---|---:|---:|")
    for name, mask in maskers.items():
        one = _median_ms(partial(each, mask), max(1, repeats // 3))
        whole = _median_ms(partial(mask, joined), max(1, repeats // 3))
        print(f"| {name} | {len(lines) / one * 1000:,.0f} | {len(lines) / whole * 1000:,.0f} |")


SIZE = 80_000
SPEED_SECRETS = [
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
    """Generated texts of about 80,000 characters, by name."""
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
        line + (f" {SPEED_SECRETS[i % len(SPEED_SECRETS)]}" if i % 20 == 0 else "")
        for i, line in enumerate(logs.splitlines())
    )
    return {
        "logs": logs,
        "code": code,
        "prose": prose,
        "chinese": chinese,
        "logs + a secret every 2,000 characters": secrets,
    }


def big_texts(maskers: dict[str, Mask], repeats: int) -> None:
    names = list(maskers)
    print("| text | characters | " + " | ".join(f"{n} ms" for n in names) + " | new MB/s |")
    print("|---|---:|" + "---:|" * len(names) + "---:|")
    for label, text in texts().items():
        ms = [_median_ms(partial(maskers[n], text), repeats) for n in names]
        mbs = len(text) / ms[names.index("new")] / 1_000
        cells = " | ".join(f"{m:.2f}" for m in ms)
        print(f"| {label} | {len(text):,} | {cells} | {mbs:.0f} |")


def compaction(messages: int, repeats: int, old: Mask) -> dict[str, float]:
    """Median ms of a full compaction: session log masked by the new and old redactor, and not."""
    model = FunctionModel(lambda call: SUMMARY)
    msgs = conversation(messages)
    counter = EstimatingCounter(cache_size=100_000)
    configs = {
        "session log masked (default)": CompactionConfig(trigger_messages=50, keep_messages=20),
        "masked by the old redactor": CompactionConfig(
            trigger_messages=50, keep_messages=20, redactor=old
        ),
        "unmasked (`redactor=None`)": CompactionConfig(
            trigger_messages=50, keep_messages=20, redactor=None
        ),
    }

    def run(config: CompactionConfig) -> float:
        with tempfile.TemporaryDirectory() as tmp:
            comp = ConversationCompactor(model, Workspace(tmp), config, token_counter=counter)
            t0 = time.perf_counter()
            result = asyncio.run(comp.compact_if_needed(msgs, session_id="b"))
            assert result is not None
            return (time.perf_counter() - t0) * 1000

    run(configs["unmasked (`redactor=None`)"])  # warm the token counter's cache
    times: dict[str, list[float]] = {name: [] for name in configs}
    for _ in range(repeats):
        for name, config in configs.items():  # alternating, so load hits all alike
            times[name].append(run(config))
    return {name: statistics.median(t) for name, t in times.items()}


def main() -> None:
    """Print the tables as Markdown."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["all", "accuracy", "speed", "compaction"], default="all")
    parser.add_argument("--old-commit", default=OLD_COMMIT)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--messages", type=int, default=1_000)
    parser.add_argument(
        "--misses", choices=SPLITS, help="list the new redactor's misses and false positives"
    )
    args = parser.parse_args()
    maskers: dict[str, Mask] = {"old": load_old(args.old_commit).redact, "new": redact}
    ds = detect_secrets_masker()
    if ds is not None:
        maskers["detect-secrets"] = ds
    if args.part in ("all", "accuracy"):
        accuracy(maskers, args.misses)
        print()
    if args.part in ("all", "speed"):
        lines_per_second(maskers, args.repeats)
        print()
        big_texts({k: v for k, v in maskers.items() if k != "detect-secrets"}, args.repeats)
        print()
    if args.part in ("all", "compaction"):
        medians = compaction(args.messages, max(3, args.repeats // 3), maskers["old"])
        print(f"| full compaction, {args.messages:,} messages | ms |")
        print("|---|---:|")
        for name, ms in medians.items():
            print(f"| {name} | {ms:.1f} |")


if __name__ == "__main__":
    main()
