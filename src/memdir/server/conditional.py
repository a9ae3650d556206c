"""Conditional replaces (RFC 9110 §13): ``If-Match: "<version>"`` replaces the version a client
read, ``If-None-Match: *`` creates; a replace with neither is refused (428, RFC 6585), so no
client overwrites an edit it never saw.

An entity tag is a store version in quotes (``ETag: "<version>"``). Versions are compared
strongly: a weak tag (``W/"..."``) never matches.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from memdir.server.problems import InvalidInput, PreconditionRequired
from memdir.store._base import Versioned

__all__ = ["Precondition", "etag", "precondition"]

_TAG: Final = re.compile(r'\s*(W/)?"([^"]*)"\s*(?:,|$)')


def etag(version: str) -> str:
    """The entity tag of a store version."""
    return f'"{version}"'


@dataclass(frozen=True, slots=True)
class Precondition:
    """What a conditional replace is based on.

    Attributes:
        create: ``If-None-Match: *``: the file must not exist yet.
        versions: the versions of ``If-Match`` (``None``: ``If-Match: *``, any existing one).
    """

    create: bool
    versions: tuple[str, ...] | None = ()

    def based_on(self, current: Versioned | None, *, empty: bytes | None = None) -> str | None:
        """The version to replace: the current one when the precondition holds, else one
        that cannot match (so the compare-and-swap reports the conflict, or the success of a
        replace that holds the same bytes).

        Args:
            current: the file as it is now (``None``: missing).
            empty: content that counts as no file for ``If-None-Match: *`` (a scaffold).
        """
        if self.create:
            if current is not None and empty is not None and current.data == empty:
                return current.version
            return None
        if current is None:
            return "" if self.versions is None else (self.versions or ("",))[0]
        if self.versions is None or current.version in self.versions:
            return current.version
        return (self.versions or ("",))[0]


def precondition(if_match: str | None, if_none_match: str | None, *, what: str) -> Precondition:
    """The precondition of a replace of ``what`` from its two headers.

    Raises:
        PreconditionRequired: neither header was sent.
        InvalidInput: both were, or one is malformed.
    """
    hint = f'send If-Match: "<version>" (the ETag GET gave) or If-None-Match: * to create {what}'
    if if_match is None and if_none_match is None:
        raise PreconditionRequired(f"a replace of {what} must say what it replaces: {hint}")
    if if_match is not None and if_none_match is not None:
        raise InvalidInput(f"send If-Match or If-None-Match, not both: {hint}")
    if if_none_match is not None:
        if if_none_match.strip() != "*":
            raise InvalidInput(f"If-None-Match on a replace takes only *: {hint}")
        return Precondition(create=True)
    assert if_match is not None
    if if_match.strip() == "*":
        return Precondition(create=False, versions=None)
    versions = _tags(if_match)
    if versions is None:
        raise InvalidInput(f"If-Match must hold quoted entity tags: {hint}")
    return Precondition(create=False, versions=versions)


def _tags(header: str) -> tuple[str, ...] | None:
    """The strong versions of an ``If-Match`` list (a weak one is kept with its ``W/``, so it
    never equals a version); ``None`` when the header is not a list of entity tags."""
    found: list[str] = []
    at = 0
    text = header.strip()
    while at < len(text):
        match = _TAG.match(text, at)
        if match is None or match.end() == at:
            return None
        found.append((match[1] or "") + match[2])
        at = match.end()
    return tuple(found) or None
