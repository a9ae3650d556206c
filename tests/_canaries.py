"""Canaries planted through memdir's public write paths, and a byte scan for them.

Used by the forget tests: each canary is a unique string that must be gone from every byte
of a workspace (and of a ``pg_dump`` of its schema) after ``memdir forget``.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import re
import unicodedata
from collections.abc import Iterable
from pathlib import Path

from _scripted_agent import compacting_agent
from memdir.ingest import ingest_sync
from memdir.memory import MemoryConsolidator, MemoryFlushManager
from memdir.messages import Msg
from memdir.models import ExtractiveModel
from memdir.tools import memory_add
from memdir.workspace import Workspace

LATIN = "Quokkazebra7731"
CHINESE = "紫色长颈鹿密码"
MIXED = "MiXeDCaNaRy4419"
CODE = "code_canary_5530"
TOOL = "toolcanary8842"
CANARIES = (LATIN, CHINESE, MIXED, CODE, TOOL)
KEPT = "The staging database runs on port 6543."
"""A fact planted beside the canaries that a forget must keep."""


def variants(canary: str) -> set[bytes]:
    """The canary as bytes, in each case and width (full-width forms) it could be stored."""
    forms = {canary, canary.lower(), canary.upper(), canary.casefold()}
    wide = {"".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in form) for form in forms}
    out: set[bytes] = set()
    for form in forms | wide | {unicodedata.normalize("NFKD", f) for f in forms}:
        out.add(form.encode("utf-8"))
        out.add(form.encode("utf-16-le"))
        out.add(json.dumps(form).strip('"').encode("ascii"))  # \uXXXX escapes
    return out


def hits(blob: bytes, canaries: Iterable[str] = CANARIES) -> list[str]:
    """The canaries (any variant) found in ``blob``."""
    return [c for c in canaries if any(v in blob for v in variants(c))]


_BASE64 = re.compile(rb'"([A-Za-z0-9+/]{8,}={0,2})"')
_HEX = re.compile(rb"\\x((?:[0-9a-f]{2})+)")


def decoded(blob: bytes) -> bytes:
    """``blob`` and, after it, what it holds encoded: a JSON string in base64 (an answer kept
    by the files store) or a ``bytea`` in hex (``\\x...``, a body in a ``pg_dump``)."""
    parts = [blob]
    for match in _BASE64.finditer(blob):
        try:
            parts.append(base64.b64decode(match[1], validate=True))
        except (binascii.Error, ValueError):
            continue
    parts.extend(bytes.fromhex(match[1].decode("ascii")) for match in _HEX.finditer(blob))
    return b"\n".join(parts)


def scan_tree(root: Path, canaries: Iterable[str] = CANARIES) -> dict[str, list[str]]:
    """Every file under ``root`` (SQLite files, WAL and journals included) holding a canary,
    as it is or encoded (:func:`decoded`)."""
    found: dict[str, list[str]] = {}
    wanted = list(canaries)
    for path in sorted(root.rglob("*")):
        if path.is_file() and (got := hits(decoded(path.read_bytes()), wanted)):
            found[str(path.relative_to(root))] = got
    return found


def plant(ws: Workspace, tmp: Path) -> None:
    """Plant every canary through the public paths, and :data:`KEPT` beside them."""
    big = f"build step output line\n{'x' * 80}\n" * 2_500 + f"error: token {TOOL} rejected\n"
    agent = compacting_agent(
        ws, summary=f"The vault word is {LATIN}; the user said {CHINESE}.", tool_output=big, echo=60
    )
    agent.call_sync("Show me the build log.")
    agent.call_sync(f"Remember that the vault word is {LATIN}.")
    agent.call_sync(f"我的密码提示是{CHINESE}，请记住。")
    for i in range(3):
        agent.call_sync(f"Question {i} about the migration plan, with some detail to it.")
    agent.close_sync()
    convo = [
        Msg.user(f"Remember that the vault word is {LATIN}."),
        Msg.user(f"The release codename is {MIXED}, please keep it."),
        Msg.user(f"我的密码提示是{CHINESE}，请记住。"),
        Msg.user(KEPT),
    ]
    flush = MemoryFlushManager(ws, ExtractiveModel())
    asyncio.run(flush.flush_memories(convo, session_id="default"))
    memory_add(f"The deploy snippet is:\n```\nrun_job --tag {CODE}\n```", workspace=ws)
    memory_add(f"Team mascot codename: {MIXED}.", workspace=ws)
    memory_add(KEPT, workspace=ws)
    transcript = tmp / "transcript.json"
    transcript.write_text(
        json.dumps(
            [
                {"role": "user", "content": f"Note for later: the alarm code is {LATIN}."},
                {"role": "assistant", "content": "Noted."},
            ]
        ),
        encoding="utf-8",
    )
    ingest_sync([transcript], workspace=ws, session_id="imported", consolidate=False)
    asyncio.run(MemoryConsolidator(ws, ExtractiveModel()).consolidate())
    memory_add(f"Later note: {LATIN} rotates monthly.", workspace=ws)
    asyncio.run(MemoryConsolidator(ws, ExtractiveModel()).consolidate())


def pg_dump(url: str) -> bytes:
    """A ``pg_dump`` of the workspace's schema (``url`` carries ``?schema=``)."""
    import subprocess
    from urllib.parse import parse_qs, urlsplit, urlunsplit

    parts = urlsplit(url)
    schema = parse_qs(parts.query)["schema"][0]
    base = urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
    return subprocess.run(
        ["pg_dump", "--no-owner", "-n", schema, base], check=True, capture_output=True
    ).stdout


def scan_store(ws: Workspace, canaries: Iterable[str] = CANARIES) -> dict[str, list[str]]:
    """Every place of the workspace's store holding a canary: files (directory) or a dump
    (encoded bytes decoded, see :func:`decoded`)."""
    if ws.is_local:
        return scan_tree(ws.base, canaries)
    assert ws.url is not None
    got = hits(decoded(pg_dump(ws.url)), canaries)
    return {"pg_dump": got} if got else {}
