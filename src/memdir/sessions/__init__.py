"""Session logs: raw conversation messages offloaded before compaction, never lost.

``sessions/<session_id>.log.jsonl`` holds one JSON record per line (UTF-8)::

    {"v":1,"type":"message","session":"s1","offloaded_at":"2026-11-30T09:00:00+00:00",
     "msg":{...Msg.to_dict()...}}

The log is append-only and keeps every message in full: tool inputs and outputs are never
truncated (an optional ``redact`` hook masks secrets in text fields first). Appends are
idempotent: a message whose id is already in the log is not written again, checked under the
same lock as the write, so several processes offloading the same conversation write each
message once. Each :meth:`SessionLog.append` is one locked ``write``; if it fails (disk full,
permission denied) the file is truncated back, so no partial record is ever left behind.

The reader tolerates damage: a torn last line (a write interrupted by a crash) is skipped,
and any other line that is not a valid record is reported with its line number and the
reason instead of failing the read. Records are addressed by line numbers: ``append`` returns
the :class:`LogSpan` it wrote and :meth:`SessionLog.messages` reads a span back.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from memdir.errors import SessionLogError, WorkspaceError
from memdir.forget._guard import guard_messages
from memdir.messages import Msg
from memdir.sessions._record import (
    RECORD_VERSION,
    LogRecord,
    Redactor,
    parse_record,
    record_id,
    redact_message,
)
from memdir.store.workspace import SESSIONS_DIR, Workspace, fsync_dir, locked_append

__all__ = [
    "LOG_SUFFIX",
    "LogReadResult",
    "LogRecord",
    "LogSpan",
    "SessionHit",
    "SessionIndex",
    "SessionInfo",
    "SessionLog",
    "close_session_indexes",
    "fsync_dir",
    "list_session_infos",
    "list_sessions",
    "locked_append",
    "search_sessions",
    "shared_session_index",
    "validate_session_id",
]

LOG_SUFFIX = ".log.jsonl"
_SESSION_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}")


def validate_session_id(session_id: str) -> str:
    """Return ``session_id`` if it is a valid session id, else raise :class:`SessionLogError`.

    Valid ids are 1-128 characters of ``A-Z a-z 0-9 . _ -`` not starting with a dot, so an id
    is always one plain file name inside ``sessions/``.
    """
    if not isinstance(session_id, str) or not _SESSION_ID.fullmatch(session_id):
        raise SessionLogError(
            f"invalid session id {session_id!r}: use 1-128 characters of A-Z a-z 0-9 . _ - "
            "that do not start with a dot"
        )
    return session_id


@dataclass(frozen=True, slots=True, kw_only=True)
class LogSpan:
    """A range of lines in a session log (1-based, inclusive).

    Attributes:
        path: the log's workspace-relative path (``sessions/<id>.log.jsonl``).
        start_line: the first line.
        end_line: the last line.
    """

    path: str
    start_line: int
    end_line: int


@dataclass(frozen=True, slots=True, kw_only=True)
class LogReadResult:
    """What :meth:`SessionLog.read` found.

    Attributes:
        records: the valid message records, in file order.
        malformed: ``(line number, reason)`` for every line that is not a valid record.
        torn_tail: whether an incomplete last line (an interrupted write) was skipped.
    """

    records: list[LogRecord] = field(default_factory=list)
    malformed: list[tuple[int, str]] = field(default_factory=list)
    torn_tail: bool = False


@dataclass(slots=True)
class _Scan:
    """What is known about the file up to ``parsed_upto`` (the end of its last full line)."""

    inode: str = ""  # the file's identity (re-created: parse again)
    size: int = -1
    mtime_ns: str = ""  # the file's change tag
    parsed_upto: int = 0
    lines: int = 0
    ids: set[str] = field(default_factory=set)
    tail_id: str | None = None  # id of a valid record after the last newline, if any


class SessionLog:
    """The append-only log of one session's offloaded messages.

    Args:
        workspace: the workspace (its ``sessions/`` directory holds the log).
        session_id: 1-128 characters of ``A-Z a-z 0-9 . _ -``, not starting with a dot.
        redact: applied to every text field (text, thinking, tool input strings, tool output)
            before a message is written; e.g. :class:`memdir.redact.Redactor`.

    Raises:
        SessionLogError: the session id is invalid.
    """

    def __init__(
        self,
        workspace: Workspace,
        session_id: str,
        *,
        redact: Redactor | None = None,
    ) -> None:
        if not isinstance(workspace, Workspace):
            raise SessionLogError(
                f"SessionLog needs a Workspace, not {type(workspace).__name__}: "
                "pass Workspace(path)"
            )
        self.workspace = workspace
        self.session_id = validate_session_id(session_id)
        self.rel_path = f"{SESSIONS_DIR}/{session_id}{LOG_SUFFIX}"
        self.redact = redact
        self._scan = _Scan()

    def __repr__(self) -> str:
        return f"SessionLog({self.rel_path!r})"

    @property
    def path(self) -> Path:
        """The log's file (a workspace on disk only; see :attr:`rel_path`)."""
        return self.workspace.root / self.rel_path

    # -- writing ------------------------------------------------------------------------------

    def append(self, msgs: Iterable[Msg], *, fsync: bool = True) -> LogSpan | None:
        """Append the messages that are not in the log yet, in one locked write.

        Args:
            msgs: the messages; those whose id is already logged (or repeated) are skipped.
            fsync: flush the file to disk before returning (default; an offload must survive
                a crash that follows it).

        Returns:
            The lines written, or ``None`` when every message was already logged.

        Raises:
            SessionLogError: the log cannot be written; the file is left as it was.
            MessageFormatError: a message is not JSON-serialisable (nothing is written).
        """
        if isinstance(msgs, Msg | str | bytes | dict) or not isinstance(msgs, Iterable):
            raise SessionLogError(f"append takes a list of Msg, not {type(msgs).__name__}")
        batch = list(msgs)
        for msg in batch:
            if not isinstance(msg, Msg):
                raise SessionLogError(f"can only log Msg objects, not {type(msg).__name__}")
        if not batch:
            return None
        with self._locked():
            # A message erased since the caller read it is written as the forget left it.
            batch = guard_messages(self.workspace, batch)
            scan = self._refresh()
            # A complete record that only lacks its newline counts as logged (the reader
            # accepts it, and the next write ends its line).
            seen = scan.ids | ({scan.tail_id} if scan.tail_id else set())
            fresh: list[Msg] = []
            for msg in batch:
                if msg.id not in seen:
                    seen.add(msg.id)
                    fresh.append(msg)
            if not fresh:
                return None
            stamp = self.workspace.utc_now().isoformat()
            payload = b"".join(self._encode(msg, stamp) for msg in fresh)
            created = self.workspace.stat(self.rel_path) is None
            before = max(scan.size, 0)
            torn = before > scan.parsed_upto
            try:
                _, end = self.workspace.append_bytes(self.rel_path, payload, fsync=fsync)
            except BaseException as exc:  # also an interrupt mid-write: never leave a part
                self._roll_back(created)
                if isinstance(exc, WorkspaceError):
                    raise SessionLogError(
                        f"cannot write session log {self.rel_path}: {exc}; nothing was written"
                    ) from exc
                raise
            first = scan.lines + (1 if torn else 0) + 1
            written = {m.id for m in fresh} | ({scan.tail_id} if scan.tail_id else set())
            self._remember(scan, end, first - 1 + len(fresh), written)
            return LogSpan(path=self.rel_path, start_line=first, end_line=first + len(fresh) - 1)

    def _encode(self, msg: Msg, stamp: str) -> bytes:
        if self.redact is not None:
            msg = redact_message(msg, self.redact)
        record = {
            "v": RECORD_VERSION,
            "type": "message",
            "session": self.session_id,
            "offloaded_at": stamp,
            "msg": msg.to_dict(),
        }
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
        try:
            return (line + "\n").encode("utf-8")
        except UnicodeEncodeError:
            # Lone surrogates cannot be UTF-8: escape them (and only then everything) as \\uXXXX.
            line = json.dumps(record, ensure_ascii=True, separators=(",", ":"))
            return (line + "\n").encode("ascii")

    def _roll_back(self, created: bool) -> None:
        # The store's append is all or nothing (a file store cuts the file back to its old
        # size under its lock; a database rolls back); what is left to undo is a file this
        # append created.
        with contextlib.suppress(OSError, WorkspaceError):
            st = self.workspace.stat(self.rel_path)
            if created and st is not None and st.size == 0:
                self.workspace.delete(self.rel_path)
        self._scan = _Scan()

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        # Distinct from any lock a caller may hold on the whole session (e.g. an agent turn).
        name = f"session-log-{self.session_id}"
        if len(name) > 100:
            name = "session-log-" + hashlib.sha256(self.session_id.encode()).hexdigest()[:40]
        with contextlib.ExitStack() as stack:
            # Only taking the lock is wrapped: errors of the locked work keep their own text.
            try:
                stack.enter_context(self.workspace.lock(name))
            except (WorkspaceError, OSError) as exc:
                raise SessionLogError(f"cannot lock session log {self.rel_path}: {exc}") from exc
            yield

    # -- the id cache -------------------------------------------------------------------------

    def _refresh(self) -> _Scan:
        """Bring the cached ids and line count up to date, reading only what was appended."""
        try:
            st = self.workspace.stat(self.rel_path)
        except (WorkspaceError, OSError) as exc:
            raise SessionLogError(f"cannot read session log {self.rel_path}: {exc}") from exc
        if st is None:
            self._scan = _Scan(size=0)
            return self._scan
        scan = self._scan
        if (st.identity, st.size, st.tag) == (scan.inode, scan.size, scan.mtime_ns):
            return scan
        if st.identity != scan.inode or st.size < scan.parsed_upto:
            scan = _Scan()  # replaced or shrunk: parse from the start
        try:
            chunk = self.workspace.read_from(self.rel_path, scan.parsed_upto)
        except FileNotFoundError:
            self._scan = _Scan(size=0)
            return self._scan
        except (WorkspaceError, OSError) as exc:
            raise SessionLogError(f"cannot read session log {self.rel_path}: {exc}") from exc
        complete = chunk[: chunk.rfind(b"\n") + 1]
        for raw in complete.split(b"\n")[:-1]:
            msg_id = record_id(raw)
            if msg_id is not None:
                scan.ids.add(msg_id)
        scan.lines += complete.count(b"\n")
        scan.tail_id = record_id(chunk[len(complete) :]) if len(chunk) > len(complete) else None
        scan.size = scan.parsed_upto + len(chunk)
        scan.parsed_upto += len(complete)
        scan.inode, scan.mtime_ns = st.identity, st.tag
        self._scan = scan
        return scan

    def _remember(self, scan: _Scan, end: int, lines: int, ids: set[str]) -> None:
        try:
            st = self.workspace.stat(self.rel_path)
        except (WorkspaceError, OSError):
            st = None
        if st is None:
            self._scan = _Scan()
            return
        scan.ids |= ids
        scan.tail_id = None
        scan.lines, scan.parsed_upto = lines, end
        scan.inode, scan.size, scan.mtime_ns = st.identity, end, st.tag
        if st.size != end:  # another writer bypassed the lock: re-read next time
            scan.size = -1

    # -- reading ------------------------------------------------------------------------------

    def ids(self) -> set[str]:
        """Ids of every message in the log."""
        with self._locked():
            return set(self._refresh().ids)

    def read(self) -> LogReadResult:
        """Every record, plus the lines that could not be read (never raises for bad lines).

        Raises:
            SessionLogError: the file exists but cannot be read at all.
        """
        return self._read(None, None)

    def messages(self, start_line: int | None = None, end_line: int | None = None) -> list[Msg]:
        """The messages on lines ``start_line..end_line`` (1-based, inclusive; default all).

        Bad lines in the range are skipped (see :meth:`read` for why).

        Raises:
            SessionLogError: a line number below 1 or an end before the start.
        """
        for name, value in (("start_line", start_line), ("end_line", end_line)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise SessionLogError(f"{name} must be an int, not {type(value).__name__}")
        if start_line is not None and start_line < 1:
            raise SessionLogError("start_line must be 1 or more")
        if end_line is not None and end_line < (start_line or 1):
            raise SessionLogError("end_line must not be before start_line")
        return [r.msg for r in self._read(start_line, end_line).records]

    def read_span(self, span: LogSpan) -> list[Msg]:
        """The messages of a :class:`LogSpan` returned by :meth:`append`."""
        if span.path != self.rel_path:
            raise SessionLogError(f"span {span.path} belongs to another log than {self.rel_path}")
        return self.messages(span.start_line, span.end_line)

    def _read(self, start: int | None, end: int | None) -> LogReadResult:
        try:
            data = self.workspace.read_bytes(self.rel_path)
        except FileNotFoundError:
            return LogReadResult()
        except (WorkspaceError, OSError) as exc:
            raise SessionLogError(f"cannot read session log {self.rel_path}: {exc}") from exc
        records: list[LogRecord] = []
        malformed: list[tuple[int, str]] = []
        torn = False
        lines = data.split(b"\n")
        tail = lines.pop()  # b"" when the file ends with a newline
        if tail:
            lines.append(tail)
        for number, raw in enumerate(lines, start=1):
            if start is not None and number < start:
                continue
            if end is not None and number > end:
                break
            if not raw.strip():
                continue
            record, reason = parse_record(raw, number)
            if record is not None:
                records.append(record)
            elif tail and number == len(lines):
                torn = True  # an interrupted write; the next append starts a new line
            elif reason:
                malformed.append((number, reason))
        return LogReadResult(records=records, malformed=malformed, torn_tail=torn)


# Older private name, still imported by memdir.ingest._prepare.
_redact_message = redact_message


def list_sessions(workspace: Workspace) -> list[str]:
    """Ids of the sessions that have a log in ``workspace``, sorted."""
    found = []
    for entry in workspace.listdir(SESSIONS_DIR):
        if entry.name.endswith(LOG_SUFFIX) and entry.kind == "file":
            session_id = entry.name[: -len(LOG_SUFFIX)]
            if _SESSION_ID.fullmatch(session_id):
                found.append(session_id)
    return sorted(found)


# Search over the logs (after the names above: the index modules import them back).
from memdir.sessions._catalog import SessionIndex, SessionInfo  # noqa: E402
from memdir.sessions._search import (  # noqa: E402
    SessionHit,
    close_session_indexes,
    list_session_infos,
    search_sessions,
    shared_session_index,
)
