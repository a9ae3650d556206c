"""Store items as JSON records, the checks of store operations, and items' searchable text."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from langgraph.store.base import InvalidNamespaceError, Item, PutOp, SearchItem, get_text_at_path

from memdir.adapters.langgraph._filter import StoreInputError

__all__ = [
    "check_count",
    "check_labels",
    "check_put",
    "dumps",
    "is_item",
    "is_record",
    "search_text",
    "searchable_texts",
    "to_item",
    "to_search_item",
]


def check_labels(namespace: tuple[str, ...]) -> None:
    for label in namespace:
        if not isinstance(label, str) or not label or "." in label or "\x00" in label:
            raise InvalidNamespaceError(
                f"invalid namespace label {label!r} in {namespace!r}: labels are non-empty "
                "strings without '.' or NUL"
            )


def check_put(op: PutOp) -> None:
    namespace = tuple(op.namespace)
    if not namespace:
        raise InvalidNamespaceError("a namespace cannot be empty")
    check_labels(namespace)
    if namespace[0] == "langgraph" and op.value is not None:
        raise InvalidNamespaceError(f'the root label cannot be "langgraph": {namespace!r}')
    if op.ttl is not None:
        raise NotImplementedError("MemdirStore keeps items until they are deleted: pass ttl=None")
    if op.value is not None and not isinstance(op.value, Mapping):
        raise StoreInputError(f"a store value must be a dict, not {type(op.value).__name__}")
    if op.index not in (None, False) and (
        isinstance(op.index, str) or not all(isinstance(p, str) for p in op.index or ())
    ):
        raise StoreInputError('index must be False, None or a list of JSON paths like ["content"]')


def check_count(label: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise StoreInputError(f"{label} must be a non-negative integer, not {value!r}")
    return value


def is_record(record: object) -> bool:
    return (
        isinstance(record, dict)
        and isinstance(record.get("namespace"), list)
        and all(isinstance(label, str) for label in record["namespace"])
        and isinstance(record.get("key"), str)
        and isinstance(record.get("value"), dict)
        and isinstance(record.get("created_at"), str)
        and isinstance(record.get("updated_at"), str)
    )


def is_item(record: Mapping[str, Any], namespace: tuple[str, ...], key: str) -> bool:
    return tuple(record["namespace"]) == namespace and record["key"] == key


def to_item(record: Mapping[str, Any]) -> Item:
    return Item(
        value=record["value"],
        key=record["key"],
        namespace=tuple(record["namespace"]),
        created_at=datetime.fromisoformat(record["created_at"]),
        updated_at=datetime.fromisoformat(record["updated_at"]),
    )


def to_search_item(item: Item, score: float | None) -> SearchItem:
    return SearchItem(
        namespace=item.namespace,
        key=item.key,
        value=item.value,
        created_at=item.created_at,
        updated_at=item.updated_at,
        score=score,
    )


def dumps(record: Mapping[str, Any]) -> str:
    text = json.dumps(record, ensure_ascii=False, indent=2)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: JSON's \\u escapes keep it
        text = json.dumps(record, ensure_ascii=True, indent=2)
    return text + "\n"


def leaves(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, bool) or value is None:
        return []
    if isinstance(value, int | float):
        return [str(value)]
    if isinstance(value, Mapping):
        return [text for sub in value.values() for text in leaves(sub)]
    if isinstance(value, list | tuple):
        return [text for sub in value for text in leaves(sub)]
    return []


def searchable_texts(value: Mapping[str, Any], fields: Sequence[str]) -> list[str]:
    """The searchable texts of a value: its strings and numbers at ``fields``."""
    out: list[str] = []
    for path in fields:
        if path == "$":
            out.extend(leaves(value))
        else:
            out.extend(get_text_at_path(value, path))
    return [t for t in out if t.strip()]


def search_text(rel: str, texts: Sequence[str]) -> str:
    """The Markdown the index reads: the item's path as the heading, each text indented (so
    no line of it can be a heading or a fence)."""
    blocks = []
    for text in texts:
        clean = text.encode("utf-8", "replace").decode("utf-8")
        lines = ["    " + line if line.strip() else "" for line in clean.splitlines()]
        blocks.append("\n".join(lines))
    return f"# {rel}\n\n" + "\n\n".join(blocks) + "\n"
