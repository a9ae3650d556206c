"""``MemdirStore``: LangGraph's ``BaseStore`` on a memdir workspace (see ``_layout`` for files)."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, cast

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from memdir.adapters.langgraph._area import Area
from memdir.adapters.langgraph._filter import (
    StoreInputError,
    check_filter,
    matches,
    namespace_matches,
)
from memdir.adapters.langgraph._layout import (
    STORE_DIR,
    decode_name,
    is_search_namespace,
    item_rel,
    namespace_rel,
    search_rel,
    walk_items,
)
from memdir.adapters.langgraph._records import (
    check_count,
    check_labels,
    check_put,
    dumps,
    is_item,
    is_record,
    search_text,
    searchable_texts,
    to_item,
    to_search_item,
)
from memdir.embeddings import Embedder
from memdir.errors import ConfigError, MemdirError, WorkspaceError
from memdir.store.namespaces import namespace_for
from memdir.store.workspace import Workspace

__all__ = ["MemdirStore"]

log = logging.getLogger("memdir.adapters.langgraph")
_LOCK = "langgraph-store"
_MAX_HITS = 1_000  # the most hits one MemoryIndex.search returns


class MemdirStore(BaseStore):
    """LangGraph's long-term store, kept as plain files in a memdir workspace.

    ``graph.compile(store=MemdirStore(ws))``, ``create_agent(..., store=MemdirStore(ws))`` and
    LangMem's memory tools use it unchanged. Each item is a JSON file,
    ``store/<label>/.../<key>.json``, written atomically (it is never half-written, and a
    crash leaves the old or the new item); ``search(query=...)`` ranks the items through
    memdir's :class:`~memdir.index.MemoryIndex` (BM25 with CJK segmentation, no embedding
    provider needed; hybrid with ``embedder=``); ``filter`` takes PostgresStore's operators.

    Namespaces: a LangGraph namespace is a tuple of labels. With ``namespace_label=k``, label
    ``k`` names the memdir namespace the item lives in (``namespace_for(user_id=label)``, e.g.
    ``namespace_label=1`` for LangMem's ``("memories", "{langgraph_user_id}")``), so each user's
    items sit in ``ns/<user>/store/`` beside that user's ``MEMORY.md`` and ledgers; the whole
    tuple is kept either way, so no two namespaces share files. Without it (default), every
    item lives in the workspace given.

    Args:
        workspace: the workspace (or its path; default: the configured one).
        namespace_label: the position of the label that names the memdir namespace, or ``None``.
        fields: what of a value is searchable when a put does not say (LangGraph's JSON paths,
            ``"$"``: every string and number in it).
        embedder: for hybrid search, as for :class:`~memdir.index.MemoryIndex` (``None``:
            lexical).

    Raises:
        ConfigError: a setting has the wrong type.
    """

    supports_ttl: bool = False

    def __init__(
        self,
        workspace: Workspace | str | os.PathLike[str] | None = None,
        *,
        namespace_label: int | None = None,
        fields: Sequence[str] | None = None,
        embedder: Embedder | str | bool | None = None,
    ) -> None:
        if namespace_label is not None and (
            isinstance(namespace_label, bool)
            or not isinstance(namespace_label, int)
            or namespace_label < 0
        ):
            raise ConfigError("namespace_label must be a label position (0, 1, ...) or None")
        if fields is not None and (
            isinstance(fields, str) or not all(isinstance(f, str) and f for f in fields)
        ):
            raise ConfigError('fields must be a list of JSON paths, e.g. ["content"] or ["$"]')
        self.workspace = Workspace.coerce(workspace)
        self.namespace_label = namespace_label
        self.fields: list[str] = list(fields) if fields is not None else ["$"]
        self._embedder = embedder if embedder is not None else False
        self._areas: dict[str | None, Area] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"MemdirStore({self.workspace!r})"

    # -- namespaces: LangGraph tuple -> memdir namespace ----------------------------------

    def memdir_namespace(self, namespace: tuple[str, ...]) -> str | None:
        """The memdir namespace holding the items of ``namespace`` (``None``: the workspace's)."""
        label = self.namespace_label
        if label is None or len(namespace) <= label:
            return None
        return namespace_for(user_id=namespace[label])

    def _area(self, name: str | None) -> Area:
        with self._lock:
            area = self._areas.get(name)
            if area is None:
                ws = (
                    self.workspace
                    if name is None
                    else self.workspace.namespaced(name, create=False)
                )
                area = Area(name=name, ws=ws, embedder=self._embedder)
                self._areas[name] = area
            return area

    def _areas_under(self, prefix: tuple[str, ...]) -> list[Area]:
        """The areas that may hold items whose namespace starts with ``prefix``."""
        if self.namespace_label is None:
            return [self._area(None)]
        if len(prefix) > self.namespace_label:
            return [self._area(self.memdir_namespace(prefix))]
        names: list[str | None] = [None]
        names += [n for n in self.workspace.namespaces() if not is_search_namespace(n)]
        return [self._area(name) for name in names]

    # -- BaseStore ------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations: reads see the store as it was before this batch's writes.

        Raises:
            InvalidNamespaceError: a namespace label is not a non-empty string without ``.``.
            StoreInputError: a bad filter, limit or offset, or a value that is not JSON.
            NotImplementedError: a put with a TTL (this store keeps items until deleted).
            WorkspaceError: an item could not be written (nothing was written for it).
        """
        ops = list(ops)
        results: list[Result] = []
        puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for op in ops:
            if isinstance(op, GetOp):
                check_labels(op.namespace)
                results.append(self._get(op.namespace, str(op.key)))
            elif isinstance(op, SearchOp):
                check_labels(op.namespace_prefix)
                results.append(self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list_namespaces(op))
            elif isinstance(op, PutOp):
                check_put(op)
                puts[(tuple(op.namespace), str(op.key))] = op
                results.append(None)
            else:
                raise StoreInputError(f"unknown store operation {type(op).__name__}")
        for (namespace, key), op in puts.items():
            if op.value is None:
                self._delete(namespace, key)
            else:
                self._put(namespace, key, op.value, op.index)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` in a worker thread (the files are written synchronously)."""
        return await asyncio.to_thread(self.batch, list(ops))

    def close(self) -> None:
        """Close the search indexes (the store reopens them when used again)."""
        with self._lock:
            areas = list(self._areas.values())
        for area in areas:
            area.close()

    # -- items ----------------------------------------------------------------------------

    def _read(self, area: Area, rel: str) -> dict[str, Any] | None:
        try:
            data = area.ws.read_bytes(rel)
        except FileNotFoundError:
            return None
        except WorkspaceError as exc:
            log.warning("store item skipped: %s", exc)
            return None
        try:
            record = json.loads(data)
        except ValueError:
            log.warning("store item %s is not valid JSON (skipped)", rel)
            return None
        if not is_record(record):
            log.warning("store item %s is not an item (skipped)", rel)
            return None
        return cast(dict[str, Any], record)

    def _get(self, namespace: tuple[str, ...], key: str) -> Item | None:
        area = self._area(self.memdir_namespace(namespace))
        record = self._read(area, item_rel(namespace, key))
        if record is None or not is_item(record, namespace, key):
            return None
        return to_item(record)

    def _put(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: Mapping[str, Any],
        index: Literal[False] | Sequence[str] | None,
    ) -> None:
        area = self._area(self.memdir_namespace(namespace))
        rel = item_rel(namespace, key)
        plain = dict(value)
        try:
            json.dumps(plain, allow_nan=False)
        except (TypeError, ValueError, RecursionError) as exc:
            raise StoreInputError(f"the value of {key!r} is not JSON: {exc}") from None
        area.registered()
        with area.ws.lock(_LOCK):
            old = self._read(area, rel)
            if old is not None and not is_item(old, namespace, key):
                raise StoreInputError(
                    f"{rel} already holds {old['namespace']}/{old['key']!r}, whose name this file "
                    "system does not tell apart (it ignores case or normalises Unicode)"
                )
            now = area.ws.utc_now().isoformat()
            record = {
                "namespace": list(namespace),
                "key": key,
                "value": plain,
                "created_at": old["created_at"] if old is not None else now,
                "updated_at": now,
                "index": index if index is False else (list(index) if index else None),
            }
            area.ws.write_text(rel, dumps(record))
            self._write_search(area, namespace, key, rel, plain, index)

    def _write_search(
        self,
        area: Area,
        namespace: tuple[str, ...],
        key: str,
        rel: str,
        value: Mapping[str, Any],
        index: Literal[False] | Sequence[str] | None,
    ) -> None:
        srel = search_rel(namespace, key)
        texts = (
            [] if index is False else searchable_texts(value, list(index) if index else self.fields)
        )
        search = area.search
        try:
            if texts:
                search.write_text(srel, search_text(rel, texts))
            elif not search.delete(srel):
                return
            area.index.index_file(srel)
        except MemdirError as exc:  # the item is written; a later refresh indexes it
            log.warning("store item %s not indexed yet: %s", rel, exc)

    def _texts(self, value: Mapping[str, Any], index: object) -> list[str]:
        if index is False:
            return []
        fields = list(index) if isinstance(index, list | tuple) and index else self.fields
        return searchable_texts(value, fields)

    def _delete(self, namespace: tuple[str, ...], key: str) -> None:
        area = self._area(self.memdir_namespace(namespace))
        rel = item_rel(namespace, key)
        with area.ws.lock(_LOCK):
            old = self._read(area, rel)
            if old is None or not is_item(old, namespace, key):
                return
            srel = search_rel(namespace, key)
            try:
                if area.search.delete(srel):
                    area.index.index_file(srel)
            except MemdirError as exc:
                log.warning("search text of %s not removed yet: %s", rel, exc)
            area.ws.delete(rel)

    # -- search -----------------------------------------------------------------------------

    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        conditions = check_filter(op.filter)
        limit, offset = check_count("limit", op.limit), check_count("offset", op.offset)
        query = op.query.strip() if isinstance(op.query, str) else ""
        if op.query is not None and not isinstance(op.query, str):
            raise StoreInputError(f"query must be a string, not {type(op.query).__name__}")
        found: list[tuple[float | None, Item]] = []
        for area in self._areas_under(prefix):
            if not area.exists():
                continue
            if query:
                found.extend(self._ranked(area, query, prefix, conditions, offset + limit))
            else:
                found.extend((None, item) for item in self._listed(area, prefix, conditions))
        if query:
            found.sort(key=lambda pair: -(pair[0] or 0.0))
        else:  # as PostgresStore: the most recently updated first
            found.sort(key=lambda pair: (pair[1].namespace, pair[1].key))
            found.sort(key=lambda pair: pair[1].updated_at, reverse=True)
        return [to_search_item(item, score) for score, item in found[offset : offset + limit]]

    def _listed(
        self, area: Area, prefix: tuple[str, ...], conditions: Mapping[str, Any]
    ) -> list[Item]:
        out = []
        for rel_dir, files in walk_items(area.ws, namespace_rel(prefix)):
            for name in files:
                record = self._read(area, f"{rel_dir}/{name}")
                if record is None or tuple(record["namespace"])[: len(prefix)] != prefix:
                    continue
                if matches(record["value"], conditions):
                    out.append(to_item(record))
        return out

    def _ranked(
        self,
        area: Area,
        query: str,
        prefix: tuple[str, ...],
        conditions: Mapping[str, Any],
        need: int,
    ) -> list[tuple[float, Item]]:
        """Items of ``area`` matching ``query``, best first, at least ``need`` when there are.

        The index ranks lines of every namespace of the area; hits are taken in rank order
        and deepened until enough pass the prefix and the filter.
        """
        depth = min(_MAX_HITS, max(50, 3 * need))
        while True:
            try:
                hits = area.index.search(query, depth)
            except MemdirError as exc:
                log.warning("store search failed: %s", exc)
                return []
            found: list[tuple[float, Item]] = []
            seen: set[str] = set()
            for hit in hits:
                ref = hit.heading
                if ref is None or ref in seen:
                    continue
                seen.add(ref)
                record = self._read(area, ref) if ref.startswith(f"{STORE_DIR}/") else None
                if record is None or tuple(record["namespace"])[: len(prefix)] != prefix:
                    continue
                if matches(record["value"], conditions):
                    found.append((hit.score, to_item(record)))
                    if len(found) >= need:
                        return found
            if len(hits) < depth or depth >= _MAX_HITS:
                return found
            depth = min(_MAX_HITS, depth * 4)

    # -- namespaces -------------------------------------------------------------------------

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        conditions = tuple(op.match_conditions or ())
        for condition in conditions:
            check_labels(tuple(label for label in condition.path if label != "*"))
        limit, offset = check_count("limit", op.limit), check_count("offset", op.offset)
        if op.max_depth is not None and (isinstance(op.max_depth, bool) or op.max_depth < 1):
            raise StoreInputError("max_depth must be at least 1")
        found: set[tuple[str, ...]] = set()
        for area in self._areas_under(()):
            if not area.exists():
                continue
            for rel_dir, files in walk_items(area.ws, STORE_DIR):
                if not files:
                    continue
                namespace = self._namespace_of(area, rel_dir, files)
                if namespace is None:
                    continue
                if all(namespace_matches(namespace, c) for c in conditions):
                    found.add(namespace[: op.max_depth] if op.max_depth else namespace)
        return sorted(found)[offset : offset + limit]

    def _namespace_of(self, area: Area, rel_dir: str, files: list[str]) -> tuple[str, ...] | None:
        labels = [decode_name(part) for part in rel_dir.split("/")[1:]]
        if labels and all(label is not None for label in labels):
            return tuple(label for label in labels if label is not None)
        for name in files:  # a hashed label: the item knows its namespace
            record = self._read(area, f"{rel_dir}/{name}")
            if record is not None:
                return tuple(record["namespace"])
        return None

    # -- maintenance ----------------------------------------------------------------------

    def reindex(self) -> int:
        """Rebuild the search text of every item from the item files; returns the item count.

        For items edited or copied in by hand, or a ``store/.search`` that was deleted.
        """
        count = 0
        for area in self._areas_under(()):
            if not area.exists():
                continue
            wanted: set[str] = set()
            for rel_dir, files in walk_items(area.ws, STORE_DIR):
                for name in files:
                    rel = f"{rel_dir}/{name}"
                    record = self._read(area, rel)
                    if record is None or item_rel(tuple(record["namespace"]), record["key"]) != rel:
                        continue
                    namespace, key = tuple(record["namespace"]), record["key"]
                    wanted.add(search_rel(namespace, key))
                    texts = self._texts(record["value"], record.get("index"))
                    if texts:
                        area.search.write_text(search_rel(namespace, key), search_text(rel, texts))
                    count += 1
            for rel in area.search.memory_files():
                if rel not in wanted:
                    area.search.delete(rel)
            area.index.index_all_from_workspace()
        return count
