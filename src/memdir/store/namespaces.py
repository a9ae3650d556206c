"""Namespaces: many isolated memories in one workspace (one per user, session or agent).

A namespace is a sub-tree ``<root>/ns/<name>/`` with the whole layout of a workspace
(``MEMORY.md``, ``memory/``, ``sessions/``, ``large_tool_results/``, ``.index/``). No namespace
means the root itself, unchanged, so existing workspaces keep working. Nothing falls back from
one namespace to another or to the root: a namespace with no ``MEMORY.md`` has none.

Names are lowercase identifiers (``[a-z0-9][a-z0-9._@+-]*``, at most 128 characters), the
same on every file system (no two names differ only by case). :func:`namespace_for` maps any
caller identity (a user id, a session id, an agent name) to a valid name, the way the
AgentScope harness's ``IsolationScope`` does: by default the user, else the session, else none.
"""

from __future__ import annotations

import enum
import hashlib
import os
import re
from pathlib import Path
from typing import Final

from memdir.errors import ConfigError, WorkspaceError

__all__ = [
    "MAX_NAMESPACE_CHARS",
    "NAMESPACES_DIR",
    "IsolationScope",
    "list_namespaces",
    "namespace_for",
    "validate_namespace",
]

NAMESPACES_DIR: Final = "ns"
"""The directory of the workspace root that holds the namespaces."""
MAX_NAMESPACE_CHARS: Final = 128
_NAME = re.compile(r"[a-z0-9][a-z0-9._@+-]*")
_HASHED: Final = "id-"


def validate_namespace(name: object) -> str:
    """``name`` if it is a valid namespace name, else :class:`ConfigError` saying why.

    Valid: 1 to 128 characters of lowercase letters, digits and ``. _ @ + -``, starting with
    a letter or a digit (so never ``.``, ``..``, a path, a NUL or a control character).
    """
    if not isinstance(name, str):
        raise ConfigError(f"a namespace must be a string, not {type(name).__name__}")
    if not name:
        raise ConfigError("a namespace must not be empty (give none at all for the workspace root)")
    if len(name) > MAX_NAMESPACE_CHARS:
        raise ConfigError(
            f"a namespace is at most {MAX_NAMESPACE_CHARS} characters, not {len(name):,}"
        )
    if not _NAME.fullmatch(name):
        hint = (
            "lowercase it"
            if _NAME.fullmatch(name.lower())
            else "map an arbitrary id with memdir.namespace_for(user_id=...)"
        )
        raise ConfigError(
            f"invalid namespace {name[:60]!r}: use lowercase letters, digits and . _ @ + -, "
            f"starting with a letter or a digit ({hint})"
        )
    return name


class IsolationScope(enum.Enum):
    """Whose memory a call uses.

    Attributes:
        USER: the user's (``user_id``); without one, the session's; without either, the
            workspace root.
        SESSION: the session's (``session_id``).
        AGENT: the agent's (``agent_id``): every user of one agent shares its memory.
        GLOBAL: the workspace root, shared by every caller.
    """

    USER = "user"
    SESSION = "session"
    AGENT = "agent"
    GLOBAL = "global"


def namespace_for(
    scope: IsolationScope | str = IsolationScope.USER,
    *,
    user_id: str | None = None,
    session_id: str | None = None,
    agent_id: str | None = None,
) -> str | None:
    """The namespace of a caller, or ``None`` for the workspace root.

    An id that is already a valid name is used as it is (``"alice"``, ``"u-1024"``); any other
    id (``"Alice@Example.com"``, a name with spaces or slashes, a very long one, or one that
    itself starts with ``id-``) becomes ``id-`` and 32 hex digits of its BLAKE2b hash: stable,
    distinct for distinct ids, and never the name of an id passed through as it is.

    An id that is given must not be empty or blank: an application that fills ``user_id``
    from a missing user would otherwise put every such user into one shared memory.

    Raises:
        ConfigError: an unknown scope, an id that is not a string, an empty or blank id, or
            the scope's id missing (``SESSION`` without ``session_id``, ``AGENT`` without
            ``agent_id``).
    """
    try:
        chosen = scope if isinstance(scope, IsolationScope) else IsolationScope(scope)
    except ValueError:
        known = ", ".join(s.value for s in IsolationScope)
        raise ConfigError(f"unknown isolation scope {scope!r}: use one of {known}") from None
    for label, value in (("user_id", user_id), ("session_id", session_id), ("agent_id", agent_id)):
        if value is None:
            continue
        if not isinstance(value, str):
            raise ConfigError(f"{label} must be a string, not {type(value).__name__}")
        if not value.strip():
            raise ConfigError(
                f"{label} is empty: pass a real id, or None for the default "
                "(an empty id must not map every caller to one shared memory)"
            )
    if chosen is IsolationScope.GLOBAL:
        return None
    if chosen is IsolationScope.AGENT:
        return _name_of("agent_id", agent_id)
    if chosen is IsolationScope.SESSION:
        return _name_of("session_id", session_id)
    if user_id is not None:
        return _name_of("user_id", user_id)
    if session_id is not None:
        return _name_of("session_id", session_id)
    return None


def _name_of(label: str, value: str | None) -> str:
    if not value:
        raise ConfigError(f"this isolation scope needs {label}")
    # An id that looks like a hashed one is hashed too: otherwise a caller who may choose
    # its id could pick the hashed name of somebody else's and share their memory.
    if (
        len(value) <= MAX_NAMESPACE_CHARS
        and _NAME.fullmatch(value)
        and not value.startswith(_HASHED)
    ):
        return value
    return _HASHED + hashlib.blake2b(value.encode("utf-8"), digest_size=16).hexdigest()


def list_namespaces(base: Path) -> list[str]:
    """The valid namespace names under ``<base>/ns/`` that are real directories, sorted."""
    try:
        entries = list(os.scandir(base / NAMESPACES_DIR))
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as exc:
        raise WorkspaceError(f"cannot list the namespaces of {base}: {exc.strerror}") from exc
    names = []
    for entry in entries:
        try:
            name = validate_namespace(entry.name)
        except ConfigError:
            continue
        if entry.is_dir(follow_symlinks=False):
            names.append(name)
    return sorted(names)
