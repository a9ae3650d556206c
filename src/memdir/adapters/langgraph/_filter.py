"""``filter=`` of a store search, and the prefix/suffix conditions of ``list_namespaces``.

The operators are PostgresStore's: a plain value (JSON equality), ``$eq``, ``$ne``, ``$gt``,
``$gte``, ``$lt``, ``$lte``, each on a top-level key of the item's value. As in PostgreSQL, a
key the value does not have matches no condition, ``$ne`` included. Unlike PostgresStore, which
compares the text of the two sides (there ``10 < 9``), the ordering operators compare numbers as
numbers and strings as strings; a number against a string, or a boolean, matches nothing. A
dict without operators matches a value that holds those keys with those values (as LangGraph's
InMemoryStore does).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from langgraph.store.base import MatchCondition

from memdir.errors import MemdirError

__all__ = ["OPERATORS", "StoreInputError", "check_filter", "matches", "namespace_matches"]

OPERATORS: Final = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")


class StoreInputError(MemdirError, ValueError):
    """A store call with a bad argument (an unknown filter operator, a negative limit...)."""


def check_filter(filter: object) -> Mapping[str, Any]:
    """``filter`` itself if it is a valid filter (``{}`` for ``None``), else raise why not."""
    if filter is None:
        return {}
    if not isinstance(filter, Mapping):
        raise StoreInputError(f"filter must be a dict, not {type(filter).__name__}")
    for key, condition in filter.items():
        if not isinstance(key, str):
            raise StoreInputError(f"filter keys must be strings, not {key!r}")
        if isinstance(condition, Mapping):
            ops = [k for k in condition if isinstance(k, str) and k.startswith("$")]
            if ops and len(ops) != len(condition):
                raise StoreInputError(
                    f"filter on {key!r} mixes operators and keys: use one or the other"
                )
            unknown = [op for op in ops if op not in OPERATORS]
            if unknown:
                raise StoreInputError(
                    f"unsupported filter operator {unknown[0]!r}: use one of {', '.join(OPERATORS)}"
                )
    return filter


def _same(a: Any, b: Any) -> bool:
    """JSON equality: ``1 == 1.0`` but ``True != 1``; lists in order, objects by keys."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, Sequence) and not isinstance(a, str):
        return (
            isinstance(b, Sequence)
            and not isinstance(b, str)
            and len(a) == len(b)
            and all(_same(x, y) for x, y in zip(a, b, strict=True))
        )
    return type(a) is type(b) and bool(a == b)


def _ordered(a: Any, b: Any) -> tuple[Any, Any] | None:
    """Both sides if they can be ordered against each other, else ``None``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return None
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a, b
    if isinstance(a, str) and isinstance(b, str):
        return a, b
    return None


def _holds(value: Any, wanted: Mapping[str, Any]) -> bool:
    if not isinstance(value, Mapping):
        return False
    for key, sub in wanted.items():
        if key not in value:
            return False
        if isinstance(sub, Mapping):
            if not _holds(value[key], sub):
                return False
        elif not _same(value[key], sub):
            return False
    return True


def _apply(op: str, actual: Any, operand: Any) -> bool:
    if op == "$eq":
        return _same(actual, operand)
    if op == "$ne":
        return not _same(actual, operand)
    pair = _ordered(actual, operand)
    if pair is None:
        return False
    left, right = pair
    if op == "$gt":
        return bool(left > right)
    if op == "$gte":
        return bool(left >= right)
    if op == "$lt":
        return bool(left < right)
    return bool(left <= right)


def matches(value: Mapping[str, Any], filter: Mapping[str, Any]) -> bool:
    """Whether an item's value passes a (checked) filter."""
    for key, condition in filter.items():
        if key not in value:
            return False
        actual = value[key]
        if (
            isinstance(condition, Mapping)
            and condition
            and all(isinstance(k, str) and k.startswith("$") for k in condition)
        ):
            if not all(_apply(op, actual, operand) for op, operand in condition.items()):
                return False
        elif isinstance(condition, Mapping):
            if not _holds(actual, condition):
                return False
        elif not _same(actual, condition):
            return False
    return True


def namespace_matches(namespace: tuple[str, ...], condition: MatchCondition) -> bool:
    """``list_namespaces``: a ``prefix`` or ``suffix`` condition, ``"*"`` matching any label."""
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        pairs = zip(namespace, path, strict=False)
    elif condition.match_type == "suffix":
        pairs = zip(reversed(namespace), reversed(path), strict=False)
    else:
        raise StoreInputError(f"unknown namespace match type {condition.match_type!r}")
    return all(want == "*" or label == want for label, want in pairs)
