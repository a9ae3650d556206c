"""Masking the framework data an adapter keeps beside a message's blocks.

Converters keep what memdir has no block for (ids, statuses, a framework's own JSON of the
message) in ``Msg.metadata``. The session log masks a message's blocks; :func:`mask_metadata`
masks the text in that metadata too, leaving identifiers and opaque tokens as they are, so that
nothing a framework message held reaches the log unmasked.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

from memdir.messages import Msg

__all__ = ["mask_metadata"]


def mask_metadata(
    msg: Msg, key: str, redact: Callable[[str], str], *, opaque: Collection[str]
) -> Msg:
    """``msg`` with ``redact`` applied to every string under ``metadata[key]``.

    Strings directly under a key in ``opaque`` (ids, types, signatures) are left alone.
    Returns ``msg`` itself when nothing changed.
    """
    value = msg.metadata.get(key)
    if value is None:
        return msg
    masked = _mask(value, redact, None, opaque)
    if masked == value:
        return msg
    return Msg(
        role=msg.role,
        content=msg.content,
        name=msg.name,
        id=msg.id,
        created_at=msg.created_at,
        metadata={**msg.metadata, key: masked},
    )


def _mask(
    value: Any, redact: Callable[[str], str], key: str | None, opaque: Collection[str]
) -> Any:
    if isinstance(value, str):
        return value if key in opaque else redact(value)
    if isinstance(value, Mapping):
        return {k: _mask(v, redact, k, opaque) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask(v, redact, key, opaque) for v in value]
    return value
