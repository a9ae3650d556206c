"""Exceptions raised by memdir.

Every error memdir raises on purpose derives from :class:`MemdirError`, so callers can catch
one type. Messages are one line and say what to do next.

::

    MemdirError
    ├── ConfigError          bad configuration or a missing setting (e.g. an API key)
    ├── WorkspaceError       a path outside the workspace, an unreadable or unwritable file,
    │   │                    a database that cannot be reached (the write was not made)
    │   ├── OutcomeUnknownError  a write was sent, then the database went away before it
    │   │                        answered: it may or may not be written (its key says which)
    │   └── VersionConflict  a file changed since the version a replace was based on
    ├── IndexError_          the search index cannot be used (see IndexCorruptError)
    │   └── IndexCorruptError   the database is damaged or from a foreign version
    ├── ModelError           a model provider failed (HTTP error, bad payload, timeout)
    │   └── ContextOverflowError the request was larger than the model's context window
    ├── ToolInputError       a tool was called with bad arguments
    ├── SessionLogError      a session log could not be written or read
    ├── MessageFormatError   a malformed message or block (also a ValueError; memdir.messages)
    │   ├── UnknownRoleError
    │   └── MissingToolCallIdError
    └── SessionBusyError     another turn of the same session is running (memdir.agent)

Wrong argument types on public entry points raise the family member of the module called
(``WorkspaceError`` from :class:`~memdir.store.workspace.Workspace`, ``ConfigError`` from models and
token counters, ``MessageFormatError`` from message converters), never a bare ``TypeError``.
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "ContextOverflowError",
    "IndexCorruptError",
    "IndexError_",
    "MemdirError",
    "ModelError",
    "OutcomeUnknownError",
    "SessionLogError",
    "ToolInputError",
    "VersionConflict",
    "WorkspaceError",
]


class MemdirError(Exception):
    """Base class of every error memdir raises on purpose."""


class ConfigError(MemdirError):
    """A setting is missing or invalid."""


class WorkspaceError(MemdirError):
    """A workspace path is invalid, outside the workspace, or cannot be read or written."""


class OutcomeUnknownError(WorkspaceError):
    """A write reached the database, which then went away before it answered.

    The write may or may not have been made; any other :class:`WorkspaceError` from a write
    means it was not. Each write carries a key, kept with it when it is made: once the database
    is back, ``PostgresStore.was_written(key)`` says whether it was made (then do not write it
    again).

    Attributes:
        key: the write's key (a UUID, as text).
        what: the write, for messages (``"the append to memory/2026-01-02.md"``).
    """

    def __init__(self, message: str, *, key: str, what: str) -> None:
        super().__init__(message)
        self.key = key
        self.what = what


class VersionConflict(WorkspaceError):
    """A replace was based on a version of a file that is no longer its current one.

    Someone else changed the file after it was read; nothing was written. Read it again, merge,
    and replace with the new version.

    Attributes:
        current: the file's version now (``None``: it does not exist).
    """

    def __init__(self, message: str, *, current: str | None) -> None:
        super().__init__(message)
        self.current = current


class IndexError_(MemdirError):
    """The search index cannot be used."""


class IndexCorruptError(IndexError_):
    """The index database is damaged or was written by an incompatible version."""


class ModelError(MemdirError):
    """A model call failed.

    Attributes:
        status_code: the HTTP status of the provider's answer, when there was one.
        body: the provider's error payload (parsed JSON or text), when there was one.
    """

    def __init__(
        self, message: str, *, status_code: int | None = None, body: object = None
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.body = body


class ContextOverflowError(ModelError):
    """The request did not fit in the model's context window."""


class ToolInputError(MemdirError):
    """A tool was called with arguments it cannot use."""


class SessionLogError(MemdirError):
    """A session log could not be written or read."""
