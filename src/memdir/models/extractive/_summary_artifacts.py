"""Identifier-like tokens for the ``## ARTIFACTS`` section of the extractive summary.

What a developer needs to pick the work up again is mostly names: the files touched, the
commands run, ticket keys, commit ids, versions, URLs and ports. They are found with general
patterns in message text, in tool-call arguments and in tool results, and sorted into four
groups: ``Files``, ``Commands``, ``Identifiers`` (ticket and issue keys, labelled numbers
such as ``PR 42`` or ``build 1234``, UUIDs, hashes, versions and pins, e-mail addresses,
environment variables, SQL tables) and ``URLs`` (URLs and ``host:port``).

Each find carries a tier used when the section is over its cap: files a tool changed (2)
outlive names mentioned in conversation or arguments (1), which outlive names seen only in
tool output (0), which is often a whole file or listing. Secrets are masked later, on the
rendered summary, by :func:`memdir.redact.redact`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from memdir.messages import ToolUseBlock

__all__ = [
    "GROUPS",
    "Found",
    "call_command",
    "call_modifies",
    "key_of",
    "scan_call",
    "scan_text",
]

GROUPS = ("Files", "Commands", "Identifiers", "URLs")


@dataclass(frozen=True, slots=True, kw_only=True)
class Found:
    """One artifact: its group, a key to deduplicate on, the text shown, and its tier."""

    group: str
    key: str
    text: str
    tier: int


def key_of(group: str, text: str) -> str:
    """What two mentions of an artifact share: ``./a.py`` is ``a.py``, ids ignore case."""
    text = text.strip()
    if group == "Files":
        return text[2:] if text.startswith("./") else text
    if group == "Commands":
        return " ".join(text.split())
    if group == "URLs":
        return text.rstrip("/")
    return text.casefold()


def _found(group: str, text: str, tier: int) -> Found:
    return Found(group=group, key=key_of(group, text), text=text, tier=tier)


# -- patterns ---------------------------------------------------------------------------------

_EXTS = (
    "py pyi pyx ipynb md mdx txt rst adoc json jsonl ndjson yaml yml toml ini cfg conf env "
    "properties lock js mjs cjs ts tsx jsx vue svelte go rs java kt kts scala groovy gradle c h "
    "cc cpp cxx hpp cs fs swift rb php pl lua dart ex exs erl hs ml clj sh bash zsh fish ps1 "
    "bat cmd sql prisma graphql proto tf tfvars hcl html htm css scss sass less csv tsv log xml "
    "xsd plist pdf png jpg jpeg gif svg webp docx doc xlsx xls pptx zip tar gz tgz bz2 xz whl jar "
    "db sqlite sqlite3 parquet pem crt patch diff service"
)
_EXT_SET = frozenset(_EXTS.split())
_EXT = "|".join(sorted(_EXT_SET, key=len, reverse=True))
_P = r"[A-Za-z0-9_.@+~-]"  # ASCII only: CJK text around a path is not part of it
_NB = r"(?<![A-Za-z0-9_/.:@+~\\-])"
_PATH = re.compile(
    # with an extension: src/app.py, ./run.sh, /etc/hosts.conf, README.md
    _NB + r"(?:~/|\.{1,2}/|/)?(?:" + _P + r"+/)*" + _P + r"+\.(?:" + _EXT + r")(?![A-Za-z0-9_])"
    # anchored directories or files: /var/log/app, ~/projects/x, ./build/
    r"|" + _NB + r"(?:~/|\.{1,2}/|/)(?:" + _P + r"+/)*" + _P + r"+/?"
    # relative without extension: src/memdir/models, docs/api/
    r"|" + _NB + r"(?:" + _P + r"+/){2,}(?:" + _P + r"+)?|" + _NB + _P + r"+/" + _P + r"+/"
    # a directory named with its slash: migrations/
    r"|" + _NB + _P + r"+/(?=[\s,;:)）]|$)"
)
_WIN_PATH = re.compile(
    r"(?<![\w\\])(?:[A-Za-z]:\\|\\\\[\w.$-]+\\|\.{1,2}\\)(?:[^\\/:*?\"<>|\s]+\\)*"
    r"[^\\/:*?\"<>|\s,;'`)]*"
)
_NAMED_FILE = re.compile(
    r"(?<![\w./-])(?:Makefile|Dockerfile|Containerfile|Jenkinsfile|Vagrantfile|Procfile|"
    r"Gemfile|Rakefile|Justfile|Pipfile|\.env(?:\.[a-z]+)?|\.gitignore|\.dockerignore|"
    r"\.editorconfig|\.npmrc|\.bashrc|\.zshrc)(?![\w.-])"
)
_NOT_FILES = frozenset({"node.js", "next.js", "vue.js", "nuxt.js", "express.js", "three.js"})
_URL = re.compile(
    r"\b(?:https?|ftp|wss?|s3|gs|file|postgres(?:ql)?|mysql|redis|mongodb(?:\+srv)?|amqps?)"
    r"://[^\s<>\"'`)\]}，。、；）]+"
)
_EMAIL = re.compile(
    r"(?<![\w.+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b"
)
_HOST_PORT = re.compile(
    r"(?<![\w.:/@-])((?:\d{1,3}\.){3}\d{1,3}|localhost|(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+"
    r"[a-z]{2,}|[a-z][a-z0-9-]*):(\d{2,5})(?!\d|[.:]\d)"
)
_NOT_HOSTS = frozenset({"line", "col", "column", "step", "page", "size", "port", "timeout", "id"})
# Labelled numbers: strong labels take any number, weak ones (builds, jobs, orders) need
# three characters so that "build 10 images" is not an identifier.
_LABELLED = re.compile(
    r"\b(?:(?P<strong>PR|MR|[Pp]ull [Rr]equest|[Mm]erge [Rr]equest|[Ii]ssue|[Tt]icket|[Bb]ug|"
    r"CL|[Cc]hangelist)|(?P<weak>[Bb]uild|[Jj]ob|[Pp]ipeline|[Ii]ncident|[Oo]rder|[Ii]nvoice|"
    r"[Rr]elease))[ \t]*(?::[ \t]*)?(?P<num>#?\d[\w.-]*\w|#?\d)(?![\w-])"
)
_TICKET = re.compile(r"(?<![\w-])(?:CVE-\d{4}-\d{4,7}|[A-Z][A-Z0-9]{1,9}-\d{1,7})(?![\w-])")
_NOT_TICKETS = frozenset({"UTF", "SHA", "ISO", "AES", "RSA", "HMAC", "MD", "CRC", "GPT", "IPV"})
_ISSUE = re.compile(r"(?<![\w&])(?:[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)?#\d{1,7}\b")
_UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I)
_HASH = re.compile(r"(?<![\w-])(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,64}(?![\w-])")
_VERSION = re.compile(
    r"(?<![\w.-])(?:[A-Za-z][\w.-]*(?:==|>=|<=|~=|@)v?\d+(?:\.\d+)*(?:[-+.]?[0-9A-Za-z]+)*"
    r"|v\d+(?:\.\d+){1,3}(?:[-+][0-9A-Za-z.-]*[0-9A-Za-z])?"
    r"|\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.-]*[0-9A-Za-z])?"
    r"|(?:[Vv]ersion|[Pp]ython|[Nn]ode|版本)[ \t]*v?\d+(?:\.\d+)+)(?!\w|\.\w)"
)
_ENV_REF = re.compile(r"(?<![\w$])\$\{?([A-Z_][A-Z0-9_]{1,60})\}?|%([A-Z_][A-Z0-9_]{1,60})%")
_ENV_BARE = re.compile(r"(?<![\w.$/-])[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+(?![\w-]|\.\w)")

_SQL_GATE = re.compile(
    r"\b(?:select\b[\s\S]{1,2000}?\bfrom|insert\s+into|update\s+[\w.\"`]+\s+set|delete\s+from|"
    r"create\s+(?:temp(?:orary)?\s+)?table|alter\s+table|drop\s+table|truncate)\b",
    re.I,
)
_SQL_TABLE = re.compile(
    r"\b(?:from|join|into|update|table(?:\s+if\s+(?:not\s+)?exists)?|truncate)\s+"
    r"((?:[A-Za-z_][\w$]*\.)?[A-Za-z_][\w$]*|\"[^\"\n]{1,64}\"|`[^`\n]{1,64}`)",
    re.I,
)
_SQL_WORDS = frozenset({"select", "where", "lateral", "unnest", "values", "set", "only", "the"})

_FENCE = re.compile(r"```([\w+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.S)
_BACKTICK = re.compile(r"(?<!`)`([^`\n]{2,200})`(?!`)")
_PROMPT = re.compile(r"^\s*(?:\$|PS[^>\n]{0,40}>|>)\s+(\S.{1,200})$", re.M)
_SHELL_FENCES = frozenset({"bash", "sh", "shell", "zsh", "console", "terminal", "powershell"})
_COMMAND_LIST = (
    "git python python3 pip pip3 pytest tox nox uv uvx poetry npm npx yarn pnpm node deno "
    "bun make cmake docker docker-compose podman kubectl helm terraform ansible cargo go "
    "rustc ruff mypy black flake8 eslint prettier tsc jest vitest curl wget ls cd cat grep "
    "rg sed awk find mkdir rm cp mv chmod chown ssh scp rsync bash sh zsh memdir brew apt "
    "apt-get systemctl journalctl psql mysql sqlite3 redis-cli mvn gradle java javac dotnet "
    "tar unzip export source sudo gh aws gcloud az alembic django-admin flask uvicorn "
    "gunicorn"
)
_COMMAND_WORDS = frozenset(_COMMAND_LIST.split())
_DIGIT = re.compile(r"\d")
_PATHISH = re.compile(r"(?<!\S)[^\s/.]*(?:/|\.[\w~/.])\S*")
_OUTPUT_SPAN = 6_000
# Base64 and minified code: no names in there, and slow to scan.
_BLOB = re.compile(r"(?<!\S)\S{300,}")

# -- tool calls ---------------------------------------------------------------------------------

_SHELL_TOOL = re.compile(
    r"bash|shell|zsh|powershell|pwsh|terminal|command|cmd|console|^(?:exec|run|execute|sh)$|"
    r"[._]exec$",
    re.I,
)
_MODIFY_TOOL = re.compile(
    r"write|edit|create|patch|replace|apply|update|delete|remove|move|rename|mkdir|touch|save|"
    r"insert|append|modify",
    re.I,
)
_READ_COMMANDS = frozenset({"view", "read", "cat", "list", "ls", "open", "show", "get", "search"})
_PATH_KEYS = frozenset(
    {
        "path",
        "paths",
        "file",
        "files",
        "file_path",
        "filepath",
        "filename",
        "target_file",
        "dir",
        "directory",
        "cwd",
        "workdir",
        "source",
        "destination",
        "src",
        "dst",
        "old_path",
        "new_path",
    }
)
_URL_KEYS = frozenset({"url", "uri", "link", "href", "endpoint", "base_url"})
_COMMAND_KEYS = ("command", "cmd", "commands", "script", "shell", "code", "input", "args")
_SQL_KEYS = frozenset({"query", "sql", "statement", "statements"})


def call_command(call: ToolUseBlock) -> str | None:
    """The shell command a tool call ran, on one line, or ``None`` if it is not a shell call."""
    if not _SHELL_TOOL.search(call.name):
        return None
    for key in _COMMAND_KEYS:
        value = call.input.get(key)
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            value = " ".join(value)
        if isinstance(value, str) and value.strip():
            return _one_command(value)
    strings = [v for v in call.input.values() if isinstance(v, str) and v.strip()]
    return _one_command(strings[0]) if len(strings) == 1 else None


def call_modifies(call: ToolUseBlock) -> bool:
    """Whether a tool call changes the files it names (edit, write, create, delete, move…)."""
    sub = call.input.get("command") or call.input.get("action") or call.input.get("mode")
    if isinstance(sub, str) and sub.strip().lower() in _READ_COMMANDS:
        return False
    return bool(_MODIFY_TOOL.search(call.name)) or (
        isinstance(sub, str) and bool(_MODIFY_TOOL.search(sub))
    )


def _one_command(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    first = " ".join(lines[0].split()) if lines else ""
    more = " …" if len(lines) > 1 else ""
    return (first if len(first) <= 160 else first[:159] + "…") + more


def scan_call(call: ToolUseBlock) -> list[Found]:
    """The artifacts a tool call names: its command, the paths and URLs in its arguments."""
    out: list[Found] = []
    command = call_command(call)
    if command:
        out.append(_command(command))
    file_tier = 2 if call_modifies(call) else 1
    for key, value in _walk(call.input):
        low = key.lower()
        if not isinstance(value, str) or not value.strip():
            continue
        value = value.strip()
        if command and low in _COMMAND_KEYS:
            out.extend(f for f in scan_text(value, tier=1) if f.group != "Commands")
        elif (low in _PATH_KEYS or low.endswith(("_path", "_file", "_dir"))) and len(value) < 300:
            if "\n" not in value:
                out.append(_found("Files", value, file_tier))
        elif low in _URL_KEYS and len(value) < 500 and "\n" not in value:
            out.append(_found("URLs", value, 1))
        elif low in _SQL_KEYS:
            out.extend(_sql_tables(value, tier=1))
            out.extend(scan_text(value, tier=1))
        else:
            out.extend(scan_text(value, tier=1))
    return out


def _walk(data: Mapping[str, Any], depth: int = 0) -> Iterable[tuple[str, Any]]:
    for key, value in data.items():
        if isinstance(value, Mapping) and depth < 4:
            yield from _walk(value, depth + 1)
        elif isinstance(value, list | tuple) and depth < 4:
            for item in list(value)[:50]:
                if isinstance(item, Mapping):
                    yield from _walk(item, depth + 1)
                else:
                    yield str(key), item
        else:
            yield str(key), value


# -- text -------------------------------------------------------------------------------------


def scan_text(text: str, *, tier: int, output: bool = False) -> list[Found]:
    """The artifacts in ``text`` in order of appearance.

    Args:
        text: message text, an argument value, or tool output.
        tier: the tier given to what is found.
        output: the text is tool output: only its head and tail are read (where ids, errors
            and summaries are), and commands, SQL tables and bare ``UPPER_SNAKE`` names are
            not looked for (output quotes commands it did not run, and source code is full of
            constants).
    """
    if output and len(text) > 2 * _OUTPUT_SPAN:
        text = text[:_OUTPUT_SPAN] + "\n" + text[-_OUTPUT_SPAN:]
    if not text.strip():
        return []
    work = _BLOB.sub(lambda m: " " * len(m.group(0)), text)
    found: list[tuple[int, Found]] = []
    # Earlier patterns claim their characters: "PR #42" is one identifier, not also "#42".
    taken = bytearray(len(work))

    def add(start: int, end: int, item: Found | None) -> None:
        if item is not None and not any(taken[start:end]):
            taken[start:end] = b"\x01" * (end - start)
            found.append((start, item))

    if not output:
        for start, command in _commands(work):
            found.append((start, _command(command)))
        for start, table in _code_tables(work):
            found.append((start, table))
    # Each pattern needs some character; checking for it first skips most of them in prose.
    digits = _DIGIT.search(work) is not None
    if "://" in work:
        for m in _URL.finditer(work):
            url = m.group(0).rstrip(".,;:!?'\"")
            add(m.start(), m.start() + len(url), _found("URLs", url, tier))
    if "@" in work:
        for m in _EMAIL.finditer(work):
            add(m.start(), m.end(), _found("Identifiers", m.group(0), tier))
    if digits:
        for m in _LABELLED.finditer(work):
            if m.group("weak") and len(m.group("num").lstrip("#")) < 3:
                continue
            add(m.start(), m.end(), _found("Identifiers", " ".join(m.group(0).split()), tier))
        for m in _TICKET.finditer(work) if "-" in work else ():
            if m.group(0).split("-", 1)[0] not in _NOT_TICKETS:
                add(m.start(), m.end(), _found("Identifiers", m.group(0), tier))
        for pattern in (_ISSUE, _UUID, _HASH):
            for m in pattern.finditer(work):
                add(m.start(), m.end(), _found("Identifiers", m.group(0), tier))
    if "\\" in work:
        for m in _WIN_PATH.finditer(work):
            value = m.group(0).rstrip(".,;:")
            if len(value) > 3:
                add(m.start(), m.end(), _found("Files", value, tier))
    if digits and ":" in work:
        for m in _HOST_PORT.finditer(work):
            host, port = m.group(1), m.group(2)
            single = "." not in host and host != "localhost"
            if host.rsplit(".", 1)[-1] in _EXT_SET or (
                single and (len(port) < 4 or host in _NOT_HOSTS)
            ):
                continue
            add(m.start(), m.end(), _found("URLs", m.group(0), tier))
    # Paths are looked for only in the words that have a slash or a dot.
    for word in _PATHISH.finditer(work):
        for m in _PATH.finditer(word.group(0)):
            value = m.group(0).rstrip(".,;:")
            if _looks_like_path(value):
                start = word.start() + m.start()
                add(start, start + len(value), _file(value, tier))
    if "file" in work or "." in work:
        for m in _NAMED_FILE.finditer(work):
            add(m.start(), m.end(), _file(m.group(0), tier))
    if digits:
        for m in _VERSION.finditer(work):
            add(m.start(), m.end(), _found("Identifiers", m.group(0), tier))
    if "$" in work or "%" in work:
        for m in _ENV_REF.finditer(work):
            add(m.start(), m.end(), _found("Identifiers", m.group(1) or m.group(2), tier))
    if not output and "_" in work:
        for m in _ENV_BARE.finditer(work):
            add(m.start(), m.end(), _found("Identifiers", m.group(0), tier))
    found.sort(key=lambda item: item[0])
    return [f for _, f in found]


def _command(command: str) -> Found:
    return _found("Commands", command, 1)


def _file(value: str, tier: int) -> Found | None:
    return None if value.lower() in _NOT_FILES else _found("Files", value, tier)


def _looks_like_path(candidate: str) -> bool:
    body = candidate.strip("/")
    if not body or not re.search(r"[A-Za-z]", body) or "//" in candidate:
        return False  # dates such as 2026/11/30, fractions, protocol leftovers
    return (
        "/" in body
        or "." in body.rsplit("/", 1)[-1]
        or candidate.startswith(("~/", "./", "."))
        or candidate.endswith("/")
    )


def _commands(text: str) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    for m in _FENCE.finditer(text):
        if m.group(1).lower() not in _SHELL_FENCES:
            continue
        prompted = m.group(1).lower() in ("console", "terminal")
        for line in m.group(2).splitlines():
            line = line.strip()
            if prompted and not line.startswith(("$ ", "> ")):
                continue  # a console fence mixes commands with their output
            line = line.lstrip("$> ").strip()
            if line and not line.startswith("#"):
                out.append((m.start(2), _one_command(line)))
    prose = _FENCE.sub(lambda m: " " * len(m.group(0)), text)
    for m in _BACKTICK.finditer(prose):
        words = m.group(1).split()
        if words and (words[0] in _COMMAND_WORDS or words[0].startswith("./")) and len(words) > 1:
            out.append((m.start(), _one_command(m.group(1))))
    for m in _PROMPT.finditer(prose):
        out.append((m.start(), _one_command(m.group(1))))
    return out


def _code_tables(text: str) -> list[tuple[int, Found]]:
    """SQL tables named in code: fenced blocks and inline code, never prose."""
    out: list[tuple[int, Found]] = []
    for m in _FENCE.finditer(text):
        out.extend((m.start(2), f) for f in _sql_tables(m.group(2), tier=1))
    for m in _BACKTICK.finditer(text):
        out.extend((m.start(), f) for f in _sql_tables(m.group(1), tier=1))
    return out


def _sql_tables(code: str, *, tier: int) -> list[Found]:
    if not _SQL_GATE.search(code):
        return []
    out = []
    for m in _SQL_TABLE.finditer(code):
        name = m.group(1).strip('"`')
        if name.lower() not in _SQL_WORDS:
            out.append(_found("Identifiers", f"SQL table {name}", tier))
    return out
