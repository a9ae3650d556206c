"""A server's JSON answer as the library's own result types (``SearchHit``, ``FlushResult``...).

:func:`decode` reads a dataclass from a JSON object by the dataclass's type hints: fields the
answer lacks take their defaults, fields the dataclass lacks are ignored (a newer server may
say more), lists become the tuples the library uses, ISO dates become dates. Anything else is a
:class:`~memdir.client.RemoteError` naming the field: the server speaks another version.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

from memdir.client._errors import RemoteError
from memdir.messages import MessageFormatError, Msg

__all__ = ["decode", "json_list", "json_object"]

_T = TypeVar("_T")


class _Unexpected(Exception):
    def __init__(self, where: str, wanted: str) -> None:
        super().__init__(where)
        self.where = where
        self.wanted = wanted


def decode(kind: type[_T], data: object) -> _T:
    """``data`` (decoded JSON) as an instance of the dataclass ``kind``.

    Raises:
        RemoteError: ``data`` does not have the shape of ``kind``.
    """
    try:
        value = _value(kind, data, kind.__name__)
    except _Unexpected as exc:
        raise RemoteError(
            f"the server's answer is not what this client expects ({exc.where}: not "
            f"{exc.wanted}); is the client as new as the server?"
        ) from None
    return typing.cast(_T, value)


def json_object(data: object, what: str) -> dict[str, Any]:
    """``data`` if it is a JSON object, else a :class:`RemoteError` naming ``what``."""
    if not isinstance(data, dict):
        raise RemoteError(f"the server's answer ({what}) is not a JSON object")
    return data


def json_list(data: object, what: str) -> list[Any]:
    """``data`` if it is a JSON array, else a :class:`RemoteError` naming ``what``."""
    if not isinstance(data, list):
        raise RemoteError(f"the server's answer ({what}) is not a JSON array")
    return data


@functools.cache
def _hints(kind: type) -> dict[str, Any]:
    import memdir.index
    import memdir.memory.consolidate

    names = {
        "IndexStats": memdir.index.IndexStats,
        "EmbedStats": memdir.index.EmbedStats,
        "ConsolidationResult": memdir.memory.consolidate.ConsolidationResult,
        "Msg": Msg,
    }
    return typing.get_type_hints(kind, localns=names)


def _value(kind: Any, data: object, where: str) -> object:
    origin = typing.get_origin(kind)
    if origin in (types.UnionType, typing.Union):
        options = typing.get_args(kind)
        if data is None and type(None) in options:
            return None
        for option in options:
            if option is not type(None):
                return _value(option, data, where)
    if origin in (tuple, list):
        if not isinstance(data, list):
            raise _Unexpected(where, "a list")
        args = typing.get_args(kind)
        if origin is list:
            return [_value(args[0], item, f"{where}[{i}]") for i, item in enumerate(data)]
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_value(args[0], item, f"{where}[{i}]") for i, item in enumerate(data))
        if len(args) != len(data):
            raise _Unexpected(where, f"{len(args)} items")
        return tuple(
            _value(a, item, f"{where}[{i}]")
            for i, (a, item) in enumerate(zip(args, data, strict=True))
        )
    if origin is dict or kind is Any:
        return data
    if dataclasses.is_dataclass(kind) and kind is not Msg:
        return _dataclass(kind, data, where)
    return _scalar(kind, data, where)


def _dataclass(kind: Any, data: object, where: str) -> object:
    if not isinstance(data, Mapping):
        raise _Unexpected(where, "an object")
    hints = _hints(kind)
    values: dict[str, object] = {}
    for field in dataclasses.fields(kind):
        if field.name in data:
            values[field.name] = _value(
                hints[field.name], data[field.name], f"{where}.{field.name}"
            )
        elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            raise _Unexpected(f"{where}.{field.name}", "missing")
    return kind(**values)


def _scalar(kind: Any, data: object, where: str) -> object:
    if kind is Msg:
        try:
            return Msg.from_dict(typing.cast(Mapping[str, Any], data))
        except (MessageFormatError, TypeError, AttributeError):
            raise _Unexpected(where, "a message") from None
    if kind in (dt.datetime, dt.date) and isinstance(data, str):
        try:
            return kind.fromisoformat(data)
        except ValueError:
            raise _Unexpected(where, kind.__name__) from None
    if kind is float and isinstance(data, int | float) and not isinstance(data, bool):
        return float(data)
    if kind in (str, int, bool) and type(data) is kind:
        return data
    raise _Unexpected(where, getattr(kind, "__name__", str(kind)))
