"""What an erasure does to one file: the lines, records and messages of the erased facts.

Everything here is a pure function of a file's bytes and the erasure's keys (see
:mod:`memdir.forget._keys`), so running it again on a file already scrubbed changes nothing:
that is how a forget killed half way is completed.

- a daily ledger (``memory/<day>.md``, the archive): each erased bullet is replaced by an
  erasure line (no text: when, who asked, the key), so a reader knows something was removed;
- any other Markdown or text file (``MEMORY.md``, its versions in ``.history/``): the lines go;
- a session log, and any JSON holding messages (the agent's session state): an erased message
  keeps its id, role and tool ids, and its text becomes ``[erased]``; a compaction summary
  loses only the erased lines;
- any other JSON Lines file (the consolidation log, provenance sidecars): the records go;
- other JSON (flush and consolidation state, provenance records): the strings and list items.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from typing import Any, Final

from memdir.messages import SUMMARY_NAME

__all__ = ["ERASED_TEXT", "Erasure", "holds", "message_scrubbed", "scrub_file", "strings"]

ERASED_TEXT: Final = "[erased]"
_LEDGER = re.compile(r"^memory/(?:archive/)?\d{4}-\d{2}-\d{2}\.md$")
_KEEP_FIELDS = frozenset({"type", "id", "name", "tool_use_id", "tool_call_id", "role"})


@dataclass(frozen=True, slots=True)
class Erasure:
    """What to remove: lines by keyed hash, bullet records by id, messages by id."""

    keys: frozenset[str]
    bullet_ids: frozenset[str]
    message_ids: frozenset[str]
    key_of: Callable[[str], str]
    marker: str
    """The line that takes an erased ledger bullet's place."""

    def hit(self, text: str) -> bool:
        """Whether a line of ``text`` is erased."""
        return any(self.key_of(line) in self.keys for line in text.split("\n"))

    def strip(self, text: str) -> str:
        """``text`` without its erased lines."""
        return "\n".join(line for line in text.split("\n") if self.key_of(line) not in self.keys)


def scrub_file(rel: str, data: bytes, erasure: Erasure) -> bytes | None:
    """The file's new bytes (``data`` itself when nothing is erased), ``None``: delete it."""
    text = data.decode("utf-8", errors="replace")
    if rel.startswith("large_tool_results/"):
        return None if erasure.hit(text) else data
    if rel.endswith(".jsonl"):
        out = _jsonl(rel, text, erasure)
    elif rel.endswith((".json", "_state")):
        out = _json_file(text, erasure)
    elif _LEDGER.match(rel):
        out = _lines(text, erasure, marker=erasure.marker)
    else:
        out = _lines(text, erasure, marker=None)
    return data if out == text else out.encode("utf-8")


def _lines(text: str, erasure: Erasure, *, marker: str | None) -> str:
    out: list[str] = []
    for line in text.split("\n"):
        if erasure.key_of(line) in erasure.keys:
            if marker is not None:
                out.append(marker)
            continue
        out.append(line)
    return "\n".join(out)


def _jsonl(rel: str, text: str, erasure: Erasure) -> str:
    sidecar = rel.startswith("memory/.provenance/")
    out: list[str] = []
    for line in text.split("\n"):
        try:
            record: Any = json.loads(line) if line.strip() else None
        except ValueError:
            record = None
        if not isinstance(record, dict):
            if not erasure.hit(line):
                out.append(line)
            continue
        if sidecar and record.get("id") in erasure.bullet_ids:
            continue
        msg = record.get("msg")
        if isinstance(msg, dict):
            new = _message(msg, erasure)
            if new is not msg:
                record = {**record, "msg": new}
                line = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
            out.append(line)
            continue
        if holds(record, erasure):
            continue
        out.append(line)
    return "\n".join(out)


def _json_file(text: str, erasure: Erasure) -> str:
    try:
        data: Any = json.loads(text)
    except ValueError:
        return _lines(text, erasure, marker=None)
    new = _value(data, erasure)
    if isinstance(new, dict) and isinstance(new.get("bullets"), dict):  # MEMORY.md records
        new["bullets"] = {
            ident: record
            for ident, record in new["bullets"].items()
            if ident not in erasure.bullet_ids and not _cites(record, erasure.bullet_ids)
        }
    if new == data:
        return text
    body = json.dumps(new, ensure_ascii=False, indent=1 if "\n" in text.rstrip() else None)
    return body + "\n" if text.endswith("\n") else body


def _cites(record: Any, ids: Collection[str]) -> bool:
    sources = record.get("sources") if isinstance(record, dict) else None
    return isinstance(sources, list) and any(
        isinstance(s, dict) and s.get("id") in ids for s in sources
    )


def strings(value: Any) -> Iterator[str]:
    """Every string in a JSON value (values of objects, items of arrays), depth first."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)


def holds(value: Any, erasure: Erasure) -> bool:
    """Whether a string anywhere in the JSON value ``value`` has an erased line."""
    return any(erasure.hit(text) for text in strings(value))


def _value(value: Any, erasure: Erasure) -> Any:
    if isinstance(value, str):
        return erasure.strip(value) if erasure.hit(value) else value
    if isinstance(value, list):
        return [_value(v, erasure) for v in value if not (isinstance(v, str) and erasure.hit(v))]
    if isinstance(value, dict):
        if "role" in value and "content" in value:
            return _message(value, erasure)
        return {k: _value(v, erasure) for k, v in value.items()}
    return value


def _message(msg: dict[str, Any], erasure: Erasure) -> dict[str, Any]:
    """The message with its text erased (whole), or a summary without its erased lines;
    ``msg`` itself when it holds nothing erased."""
    named = msg.get("id") in erasure.message_ids
    if not named and not holds(msg.get("content"), erasure):
        return msg
    if not named and str(msg.get("name", "")).startswith(SUMMARY_NAME):
        return {**msg, "content": _value(msg.get("content"), erasure)}
    return {**msg, "content": _blank(msg.get("content"))}


def message_scrubbed(msg: dict[str, Any], erasure: Erasure) -> dict[str, Any] | None:
    """The message (a :meth:`Msg.to_dict` form) as an erasure leaves it, ``None`` when it
    holds nothing erased."""
    new = _message(msg, erasure)
    return None if new is msg or new == msg else new


def _blank(value: Any) -> Any:
    if isinstance(value, str):
        return ERASED_TEXT
    if isinstance(value, list):
        return [_blank(v) for v in value]
    if isinstance(value, dict):
        return {
            k: (v if k in _KEEP_FIELDS else ({} if k == "input" else _blank(v)))
            for k, v in value.items()
        }
    return value
