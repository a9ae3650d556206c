"""Pages of a list: ``?limit=`` (1 to :data:`PAGE_MAX`) and an opaque ``?cursor=`` that holds
the sort key of the last item shown, so a page is the same whatever was added before it."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Final, TypeVar

from fastapi import Query

from memdir.server.problems import InvalidInput

__all__ = ["PAGE_MAX", "Cursor", "Limit", "page_of"]

PAGE_MAX: Final = 200
"""The largest page."""
_T = TypeVar("_T")

Limit = Annotated[int, Query(ge=1, le=PAGE_MAX, description=f"Items per page, 1 to {PAGE_MAX}.")]
Cursor = Annotated[
    str | None,
    Query(max_length=2_000, description="The next_cursor of the previous page."),
]


def _encode(key: Any) -> str:
    raw = json.dumps(key, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _decode(cursor: str) -> Any:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        return json.loads(raw)
    except ValueError:
        raise InvalidInput(
            "the cursor is not one this server gave: start again without it"
        ) from None


def page_of(
    items: Sequence[_T], key: Callable[[_T], Any], cursor: str | None, limit: int
) -> tuple[list[_T], str | None]:
    """The page of ``items`` (sorted by ``key``, ascending) after ``cursor``, and the next
    page's cursor (``None`` on the last page)."""
    start = 0
    if cursor is not None:
        after = _decode(cursor)
        try:
            start = next((i for i, item in enumerate(items) if key(item) > after), len(items))
        except TypeError:
            raise InvalidInput(
                "the cursor is not one of this list: start again without it"
            ) from None
    page = list(items[start : start + limit])
    more = start + limit < len(items)
    return page, (_encode(key(page[-1])) if more and page else None)
