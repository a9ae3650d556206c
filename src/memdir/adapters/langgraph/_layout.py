"""Where a LangGraph store item lives in a workspace, as plain files (or, in PostgreSQL, rows
under the same paths).

::

    <workspace>/store/<label 1>/.../<label n>/<key>.json    one item (the truth)
    <workspace>/store/.search/memory/<digest>.md             its searchable text (derived)
    <workspace>/store/.search/.index/memory_index.db         the index of that text

In PostgreSQL, the searchable text and its index are kept in a namespace of their own instead
(:func:`search_namespace`), as a database has no directory to nest a workspace in.

A namespace label is one directory and a key one file, each name the text itself except for
``%`` escapes of what a file name cannot hold or would hide: ``/``, ``\\``, ``%``, ``#``,
whitespace, control characters and a leading ``.``. A name longer than 200 bytes becomes
``%h`` and a hash of the text. ``%`` always starts an escape of two hex digits otherwise, so
no two texts share a name; the item file holds the real namespace and key either way. LangGraph
labels never contain ``.``, so ``store/.search`` is never a namespace.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterator
from typing import Final

from memdir.errors import WorkspaceError
from memdir.store.workspace import Workspace

__all__ = [
    "ITEM_SUFFIX",
    "SEARCH_DIR",
    "STORE_DIR",
    "decode_name",
    "encode_name",
    "is_search_namespace",
    "item_rel",
    "namespace_rel",
    "search_namespace",
    "search_rel",
    "walk_items",
]

log = logging.getLogger("memdir.adapters.langgraph")

STORE_DIR: Final = "store"
SEARCH_DIR: Final = ".search"
ITEM_SUFFIX: Final = ".json"
_MAX_NAME_BYTES: Final = 200
_HASHED: Final = "%h"
_ESCAPED: Final = frozenset("/\\%#")
_SEARCH_NAMESPACE: Final = "id-langgraph-store"


def _escape(ch: str) -> str:
    return "".join(f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass"))


def encode_name(text: str) -> str:
    """The file name of a label or key (without suffix); see the module docstring."""
    out = []
    for i, ch in enumerate(text):
        code = ord(ch)
        if (
            ch in _ESCAPED
            or ch.isspace()
            or code < 0x20
            or 0x7F <= code < 0xA0
            or 0xD800 <= code < 0xE000
            or (i == 0 and ch == ".")
        ):
            out.append(_escape(ch))
        else:
            out.append(ch)
    name = "".join(out) or "%"  # the empty key: a lone % is no escape
    if len(name.encode("utf-8")) > _MAX_NAME_BYTES:
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:40]
        return _HASHED + digest
    return name


def decode_name(name: str) -> str | None:
    """The text of a name :func:`encode_name` made; ``None`` for a hashed (or foreign) one."""
    if name == "%":
        return ""
    if name.startswith(_HASHED):
        return None
    raw = bytearray()
    i = 0
    while i < len(name):
        ch = name[i]
        if ch == "%":
            digits = name[i + 1 : i + 3]
            if len(digits) != 2 or not all(c in "0123456789ABCDEF" for c in digits):
                return None
            raw.append(int(digits, 16))
            i += 3
            continue
        raw.extend(ch.encode("utf-8", "surrogatepass"))
        i += 1
    try:
        return raw.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return None


def namespace_rel(namespace: tuple[str, ...]) -> str:
    """Workspace-relative directory of a namespace (``store`` for the empty prefix)."""
    return "/".join([STORE_DIR, *(encode_name(label) for label in namespace)])


def item_rel(namespace: tuple[str, ...], key: str) -> str:
    """Workspace-relative path of an item's file."""
    return f"{namespace_rel(namespace)}/{encode_name(key)}{ITEM_SUFFIX}"


def search_rel(namespace: tuple[str, ...], key: str) -> str:
    """Path of an item's searchable text, relative to the search workspace ``store/.search``."""
    ident = json.dumps([list(namespace), key], ensure_ascii=True)
    return f"memory/{hashlib.sha256(ident.encode('ascii')).hexdigest()[:32]}.md"


def search_namespace(namespace: str | None) -> str:
    """The memdir namespace that holds, in PostgreSQL, the searchable text of the store items
    kept in memdir namespace ``namespace`` (``None``: the workspace root).

    It starts with ``id-`` but is not ``id-`` and 32 hex digits, so no caller identity maps
    to it (:func:`~memdir.store.namespaces.namespace_for` hashes every id starting with
    ``id-``): nobody's memory is ever written there, or read from there.
    """
    if namespace is None:
        return _SEARCH_NAMESPACE
    digest = hashlib.blake2b(namespace.encode("utf-8"), digest_size=16).hexdigest()
    return f"{_SEARCH_NAMESPACE}-{digest}"


def is_search_namespace(name: str) -> bool:
    """Whether ``name`` is a namespace :func:`search_namespace` makes (it holds no items)."""
    return name == _SEARCH_NAMESPACE or name.startswith(_SEARCH_NAMESPACE + "-")


def walk_items(ws: Workspace, rel_dir: str) -> Iterator[tuple[str, list[str]]]:
    """``(directory rel, [item file names])`` under ``rel_dir`` of ``ws``, parents first.

    Dot-entries (``.search``) are skipped, and a symlink to a directory is not followed;
    directories without items are listed with an empty list (their children may hold items).
    """
    stack = [rel_dir]
    while stack:
        current = stack.pop()
        try:
            entries = ws.listdir(current)
        except WorkspaceError as exc:
            log.warning("store directory skipped: %s", exc)
            continue
        files, dirs = [], []
        for entry in entries:
            if entry.name.startswith("."):
                continue
            if entry.kind == "dir":
                dirs.append(entry.name)
            elif entry.name.endswith(ITEM_SUFFIX):
                files.append(entry.name)
        yield current, sorted(files)
        stack.extend(f"{current}/{d}" for d in sorted(dirs, reverse=True))
