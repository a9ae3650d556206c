"""Deterministic synthetic memory corpus for the scale benchmark.

The text is real and legal to use, taken from this machine:

* English: docstrings of the Python standard library (parsed with :mod:`ast`, never imported);
* code: lines of the same standard-library source;
* Chinese: the zh_CN / zh_Hans gettext catalogues under ``/usr/share/locale`` (read with the
  stdlib :mod:`gettext` parser). Without catalogues, a small built-in vocabulary is used instead
  (the report says so).

The corpus is a series of daily ledgers ``memory/YYYY-MM-DD.md`` of ``lines_per_file`` non-blank
lines each: ``## Memory Flush — <instant>`` headings every few dozen lines, and bullets
``- HH:MM <body>`` with ~60% English, 25% Chinese and 15% mixed / code bodies. Every file is a pure
function of ``(seed, file index)`` and the text pools, so any file can be regenerated alone.
"""

from __future__ import annotations

import ast
import gettext
import hashlib
import os
import random
import re
import shutil
import sysconfig
import tempfile
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

__all__ = [
    "DEFAULT_SEED",
    "CorpusSpec",
    "TextPools",
    "cached_corpus",
    "default_cache_root",
    "extra_bullets",
    "generate_file",
    "ledger_rels",
    "load_pools",
]

LOCALE_ROOT = Path("/usr/share/locale")
DEFAULT_SEED = 20261130
_ZH_LOCALES = ("zh_CN", "zh_Hans")
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")
_SPACE = re.compile(r"\s+")
# Standard-library packages read besides the top-level modules: a broad, stable mix of topics.
_STDLIB_PACKAGES = (
    "asyncio",
    "collections",
    "concurrent",
    "ctypes",
    "curses",
    "dbm",
    "distutils",
    "email",
    "html",
    "http",
    "idlelib",
    "importlib",
    "json",
    "logging",
    "multiprocessing",
    "sqlite3",
    "tkinter",
    "tomllib",
    "unittest",
    "urllib",
    "wsgiref",
    "xml",
    "xmlrpc",
    "zoneinfo",
)
# Used only when no Chinese gettext catalogue exists on the machine.
_FALLBACK_ZH_TEXT = (
    "数据库 迁移 方案 索引 全文 搜索 用户 偏好 配置 文件 目录 权限 错误 日志 任务 后台 维护 "
    "连接池 上下文 压缩 摘要 会话 记录 工具 结果 模型 调用 请求 响应 超时 重试 缓存 版本 发布 "
    "测试 部署 服务器 客户端 网络 接口 参数 默认 设置 选项 命令 脚本 失败 成功 回滚 备份 恢复 "
    "同步 异步 线程 进程 内存 磁盘 编码 中文 英文 字符 格式 时间 日期 计划 会议 讨论 决定 原因 "
    "问题 方法 步骤 检查 更新 删除 创建 打开 关闭 读取 写入 导入 导出 分析 报告 文档 说明"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class TextPools:
    """The source text the corpus is drawn from.

    Attributes:
        english: docstring paragraphs, each flattened to one line.
        chinese: catalogue messages containing Chinese, one line each.
        code: stripped source lines.
        fingerprint: short hash of the pools; part of every cache key.
        chinese_source: where the Chinese text came from.
    """

    english: tuple[str, ...]
    chinese: tuple[str, ...]
    code: tuple[str, ...]
    fingerprint: str
    chinese_source: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CorpusSpec:
    """Shape of a corpus.

    Attributes:
        lines: total non-blank lines (headings + bullets) over all files.
        lines_per_file: non-blank lines per daily ledger (the last file may be shorter).
        seed: seed of every random choice.
        start: date of the first ledger.
        long_every: every ``long_every``-th bullet is a long one (0: none), a page of prose
            and code like an assistant's answer in a coding chat (:data:`LONG_BODIES`
            bodies, about 3-4k characters).
    """

    lines: int
    lines_per_file: int = 2000
    seed: int = DEFAULT_SEED
    start: date = date(2025, 1, 1)
    long_every: int = 0

    @property
    def files(self) -> int:
        """Number of daily ledgers."""
        return -(-self.lines // self.lines_per_file)

    def lines_in(self, index: int) -> int:
        """Non-blank lines of file ``index``."""
        return min(self.lines_per_file, self.lines - index * self.lines_per_file)


def _stdlib_files() -> list[Path]:
    root = Path(sysconfig.get_path("stdlib"))
    files = sorted(root.glob("*.py"))
    for package in _STDLIB_PACKAGES:
        files.extend(sorted((root / package).rglob("*.py")))
    return [f for f in files if not any("test" in d for d in f.relative_to(root).parts[:-1])]


def _docstring_nodes(tree: ast.Module) -> list[ast.Constant]:
    nodes: list[ast.Constant] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        first = node.body[0].value if node.body and isinstance(node.body[0], ast.Expr) else None
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            nodes.append(first)
    return nodes


def _english_paragraphs(doc: str) -> list[str]:
    out: list[str] = []
    for block in re.split(r"\n\s*\n", doc):
        lines = [ln.strip() for ln in block.splitlines()]
        if not lines or any(ln.startswith((">>>", "...", "::")) for ln in lines):
            continue
        text = _SPACE.sub(" ", " ".join(lines)).strip()
        words = text.split()
        letters = sum(ch.isalpha() for ch in text)
        if len(words) >= 4 and len(text) >= 20 and letters >= 0.6 * len(text):
            out.append(text)
    return out


def _python_pools(max_files: int | None) -> tuple[list[str], list[str]]:
    english: list[str] = []
    code: list[str] = []
    for path in _stdlib_files()[:max_files]:
        try:
            source = path.read_text(encoding="utf-8")
            tree = ast.parse(source)
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
            continue
        skip: set[int] = set()
        for node in _docstring_nodes(tree):
            english.extend(_english_paragraphs(str(node.value)))
            skip.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
        for number, raw in enumerate(source.splitlines(), start=1):
            line = raw.strip()
            if number in skip or not 12 <= len(line) <= 100 or line.startswith(("#", "@")):
                continue
            if any(ch in line for ch in "(=.[") and line.isascii():
                code.append(line)
    return english, code


def _catalogue_messages(locale_root: Path) -> list[str]:
    found: list[str] = []
    for name in _ZH_LOCALES:
        for path in sorted((locale_root / name / "LC_MESSAGES").glob("*.mo")):
            try:
                with path.open("rb") as handle:
                    catalogue = gettext.GNUTranslations(handle)
            except (OSError, UnicodeDecodeError, ValueError):
                continue
            # The parsed catalogue is private API; .mo files have no other stdlib reader.
            items: dict[object, str] = getattr(catalogue, "_catalog", {})
            for key, message in items.items():
                if key == "" or not isinstance(message, str):
                    continue  # the header entry
                found.extend(message.splitlines())
    return found


def _chinese_pool(locale_root: Path) -> tuple[list[str], str]:
    seen: dict[str, None] = {}
    for raw in _catalogue_messages(locale_root):
        line = _SPACE.sub(" ", raw).strip()
        han = len(_HAN.findall(line))
        if han >= 2 and han >= 0.3 * len(line.replace(" ", "")) and len(line) <= 120:
            seen.setdefault(line, None)
    if len(seen) >= 500:
        return list(seen), f"gettext catalogues ({', '.join(_ZH_LOCALES)}) under {locale_root}"
    rng = random.Random(7)
    words = _FALLBACK_ZH_TEXT.split()
    made = ["".join(rng.choices(words, k=rng.randint(3, 9))) for _ in range(20_000)]
    return made, "built-in fallback vocabulary (no zh gettext catalogue found)"


def load_pools(
    *, max_stdlib_files: int | None = None, locale_root: Path = LOCALE_ROOT
) -> TextPools:
    """Read the text pools from the standard library and the gettext catalogues.

    Args:
        max_stdlib_files: read only the first N standard-library files (for quick runs).
        locale_root: where the ``zh_CN`` / ``zh_Hans`` catalogues live.
    """
    english, code = _python_pools(max_stdlib_files)
    chinese, source = _chinese_pool(locale_root)
    english = list(dict.fromkeys(english))
    code = list(dict.fromkeys(code))
    digest = hashlib.sha256()
    for pool in (english, chinese, code):
        digest.update(str(len(pool)).encode())
        for item in pool:
            digest.update(item.encode("utf-8", "surrogatepass"))
            digest.update(b"\n")
    return TextPools(
        english=tuple(english),
        chinese=tuple(chinese),
        code=tuple(code),
        fingerprint=digest.hexdigest()[:12],
        chinese_source=source,
    )


def _clip(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` chars: at a sentence end if one is close, else a word."""
    if len(text) <= limit:
        return text
    sentence = text.rfind(". ", 0, limit)
    if sentence > limit * 2 // 3:
        return text[: sentence + 1]
    cut = text.rfind(" ", 0, limit)
    return text[: cut if cut > limit // 2 else limit].rstrip(" ,;:")


def _english_body(rng: random.Random, pools: TextPools) -> str:
    # Short paragraphs continue with the next one (usually the same docstring), as notes do.
    target = rng.randint(50, 240)
    start = rng.randrange(len(pools.english))
    parts = [pools.english[start]]
    size = len(parts[0])
    for nxt in pools.english[start + 1 : start + 4]:
        if size >= target * 3 // 4:
            break
        parts.append(nxt)
        size += len(nxt) + 1
    return _clip(" ".join(parts), target)


def _chinese_body(rng: random.Random, pools: TextPools) -> str:
    parts = rng.sample(pools.chinese, rng.randint(1, 4))
    return "；".join(parts)


def _mixed_body(rng: random.Random, pools: TextPools) -> str:
    code = rng.choice(pools.code)
    roll = rng.random()
    if roll < 0.4:
        return code
    zh = rng.choice(pools.chinese)
    if roll < 0.7:
        return f"{zh}：`{_clip(code, 60)}`"
    english = _clip(rng.choice(pools.english), 60)
    return f"{zh}（{english}）"


def _body(rng: random.Random, pools: TextPools) -> str:
    roll = rng.random()
    if roll < 0.60:
        return _english_body(rng, pools)
    if roll < 0.85:
        return _chinese_body(rng, pools)
    return _mixed_body(rng, pools)


def extra_bullets(pools: TextPools, *, seed: int, count: int, day: date) -> list[str]:
    """``count`` new bullet lines (no trailing newline), as a flush would append them."""
    rng = random.Random(f"extra:{seed}:{day.isoformat()}")
    minute = rng.randrange(24 * 60)
    return [f"- {minute // 60:02d}:{minute % 60:02d} {_body(rng, pools)}" for _ in range(count)]


LONG_BODIES = 24
"""Bodies joined into one long bullet (half English, half mixed with code)."""


def generate_file(pools: TextPools, spec: CorpusSpec, index: int, *, variant: int = 0) -> str:
    """Text of ledger ``index``; ``variant`` > 0 gives a different file with the same shape."""
    rng = random.Random(f"ledger:{spec.seed}:{index}:{variant}")
    day = spec.start + timedelta(days=index)
    total = spec.lines_in(index)
    out: list[str] = []
    next_heading = 0
    for i in range(total):
        minute = i * 24 * 60 // max(total, 1)
        stamp = f"{minute // 60:02d}:{minute % 60:02d}"
        if i == next_heading:
            if out:
                out.append("")
            out.append(f"## Memory Flush — {day.isoformat()}T{stamp}:{rng.randrange(60):02d}Z")
            next_heading = i + rng.randint(20, 80)
            continue
        if spec.long_every and i % spec.long_every == 0:
            body = " ".join(_english_body(rng, pools) for _ in range(LONG_BODIES // 2))
            body += " " + " ".join(_mixed_body(rng, pools) for _ in range(LONG_BODIES // 2))
        else:
            body = _body(rng, pools)
        out.append(f"- {stamp} {body}")
    return "\n".join(out) + "\n"


def ledger_rels(spec: CorpusSpec) -> list[str]:
    """Workspace-relative paths of the ledgers, in date order."""
    return [f"memory/{(spec.start + timedelta(days=i)).isoformat()}.md" for i in range(spec.files)]


def default_cache_root() -> Path:
    """``$MEMDIR_BENCH_CACHE`` or ``<tmp>/memdir-bench-cache`` (never inside the repository)."""
    env = os.environ.get("MEMDIR_BENCH_CACHE", "").strip()
    return Path(env) if env else Path(tempfile.gettempdir()) / "memdir-bench-cache"


def cached_corpus(pools: TextPools, spec: CorpusSpec, cache_root: Path) -> Path:
    """Directory holding ``memory/*.md`` for ``spec``; generated once, then reused.

    Treat the result as read-only: copy it before modifying files.
    """
    key = f"corpus-{spec.lines}-{spec.lines_per_file}-{spec.seed}-{spec.start}-{pools.fingerprint}"
    if spec.long_every:
        key += f"-long{spec.long_every}"
    target = cache_root / key
    if (target / ".complete").is_file():
        return target
    cache_root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=cache_root))
    try:
        memory = staging / "memory"
        memory.mkdir()
        for index, rel in enumerate(ledger_rels(spec)):
            (staging / rel).write_text(generate_file(pools, spec, index), encoding="utf-8")
        (staging / ".complete").write_text("ok\n", encoding="utf-8")
        if target.exists():
            shutil.rmtree(target)
        os.replace(staging, target)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    return target
