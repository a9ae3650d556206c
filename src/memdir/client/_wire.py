"""What the sync and the async client share about a request: its description, the
``Idempotency-Key`` of a write, and when (and after how long) an attempt is retried.

A call (:data:`Call`) is a generator that yields :class:`Request` objects and receives each
answer (an ``httpx.Response``, or the :class:`~memdir.client.RemoteError` it maps to, thrown
in), then returns its result. It does no I/O itself: ``MemdirClient`` drives it with
``httpx.Client``, ``AsyncMemdirClient`` with ``httpx.AsyncClient``, so every request is built
and every answer parsed by the same code.
"""

from __future__ import annotations

import inspect
import logging
import random
import uuid
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Generic, TypeAlias, TypeVar, cast

import httpx

from memdir.client._config import ClientConfig
from memdir.client._errors import ConnectionFailed, RemoteError, error_from_response
from memdir.client._errors import retry_after_seconds as _retry_after
from memdir.errors import WorkspaceError

__all__ = ["CHUNK", "Call", "Exchange", "Request", "Steps", "like", "part_file"]

logger = logging.getLogger("memdir.client")
_T = TypeVar("_T")

Call: TypeAlias = Generator["Request", httpx.Response, _T]
"""A client call: yields requests, receives their answers, returns its result."""

RETRY_STATUSES: Final = frozenset({429, 502, 503, 504})
"""Answers that say "try again": rate limited, or a gateway or store that is not there now."""
_IN_PROGRESS: Final = "idempotency-in-progress"
_SAFE: Final = frozenset({"GET", "HEAD", "OPTIONS"})
# Failures after which the request may be sent again: no connection, a timeout, a connection
# cut before the whole answer came. A write sent again carries the same Idempotency-Key.
_RETRY_ERRORS: Final = (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError)
CHUNK: Final = 1 << 20
"""Bytes read or written at a time by an upload or a download."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Request:
    """One HTTP request of a call.

    Attributes:
        method: the HTTP method.
        path: the path below the server's URL (``/v1/namespaces/acme.alice/search``).
        params: query parameters, in order (a name may repeat).
        json: a JSON body (``None``: none).
        content: a raw body, with its ``Content-Type`` in ``headers``.
        headers: more request headers.
        upload: a file sent as the body (read again for each attempt).
        download: where a successful answer's body is saved (atomically).
        job: a long job: waits up to the client's ``job_timeout``.
    """

    method: str
    path: str
    params: tuple[tuple[str, str], ...] = ()
    json: Any = None
    content: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    upload: Path | None = None
    download: Path | None = None
    job: bool = False

    @property
    def write(self) -> bool:
        """Whether the request changes something (it then carries an ``Idempotency-Key``)."""
        return self.method not in _SAFE


class Exchange:
    """The attempts of one request: their headers, and whether to try again.

    Args:
        request: the request.
        config: the client's settings (key, timeouts, retry policy).
    """

    def __init__(self, request: Request, config: ClientConfig) -> None:
        self.request = request
        self._config = config
        self._attempt = 0
        # One key per call, the same on each of its retries: a retry after a lost answer
        # is then recognised by the server and not written twice.
        self.idempotency_key = str(uuid.uuid4()) if request.write else None

    def build(self, http: httpx.Client | httpx.AsyncClient, content: Any = None) -> httpx.Request:
        """The next attempt's request (``content``: the body of an upload)."""
        self._attempt += 1
        request = self.request
        headers = {"Authorization": f"Bearer {self._config.api_key}", **request.headers}
        if self.idempotency_key is not None:
            headers["Idempotency-Key"] = self.idempotency_key
        if request.upload is not None:
            try:
                headers["Content-Length"] = str(request.upload.stat().st_size)
            except OSError as exc:
                raise WorkspaceError(f"cannot read {request.upload}: {exc.strerror}") from None
        seconds = self._config.job_timeout if request.job else self._config.timeout
        return http.build_request(
            request.method,
            request.path,
            params=list(request.params),
            json=request.json,
            content=content if request.upload is not None else request.content,
            headers=headers,
            timeout=httpx.Timeout(seconds, connect=min(seconds, self._config.timeout)),
        )

    def after_failure(self, exc: Exception) -> float:
        """How long to wait before trying again after ``exc`` (an attempt with no answer).

        Raises:
            ConnectionFailed: it cannot be retried, or no attempt is left.
        """
        if not isinstance(exc, _RETRY_ERRORS):
            raise ConnectionFailed(self._failure(exc, "the request to")) from None
        wait = self._backoff()
        if wait is None:
            raise ConnectionFailed(self._failure(exc, "cannot reach")) from None
        self._log(type(exc).__name__, wait)
        return wait

    def after_answer(self, response: httpx.Response) -> float | None:
        """How long to wait before trying again after ``response``; ``None``: it is the
        answer (a success, or an error to raise)."""
        status = response.status_code
        if status not in RETRY_STATUSES and not (status == 409 and _in_progress(response)):
            return None
        asked = _retry_after(response)
        if asked is not None and asked > self._config.retry.max_wait:
            return None  # longer than the caller wants to wait: its error says how long
        wait = self._backoff()
        if wait is None:
            return None
        if asked is not None:
            wait = asked + random.uniform(0, self._config.retry.backoff)
        self._log(str(status), wait)
        return wait

    def _backoff(self) -> float | None:
        policy = self._config.retry
        if self._attempt > policy.retries:
            return None
        longest = min(policy.max_backoff, policy.backoff * 2 ** (self._attempt - 1))
        return random.uniform(longest / 2, longest)

    def _failure(self, exc: Exception, what: str) -> str:
        attempts = "1 attempt" if self._attempt == 1 else f"{self._attempt} attempts"
        reason = " ".join(str(exc).split()) or type(exc).__name__
        failed = "" if what == "cannot reach" else " failed"
        return (
            f"{what} the memdir server at {self._config.base_url}{failed}: "
            f"{type(exc).__name__}: {reason[:300]} ({attempts})"
        )

    def _log(self, why: str, wait: float) -> None:
        # The path only: a query string holds memory text (q=).
        logger.info(
            "memdir client: %s %s failed (%s); attempt %d of %d in %.1f s",
            self.request.method,
            self.request.path,
            why,
            self._attempt + 1,
            self._config.retry.retries + 1,
            wait,
        )


class Steps(Generic[_T]):
    """A call driven one request at a time: ``request`` is the next one to send (``None``:
    the call is done and ``result`` holds what it returned)."""

    def __init__(self, call: Call[_T]) -> None:
        self._call = call
        self.result: _T
        self.request: Request | None = self._step(lambda: next(call))

    def answer(self, response: httpx.Response) -> None:
        """Give the call its answer (an error answer is thrown into it as a RemoteError)."""
        error = answer_error(response)
        if error is None:
            self.request = self._step(lambda: self._call.send(response))
        else:
            self.fail(error)

    def fail(self, error: RemoteError) -> None:
        """Throw ``error`` into the call (which may handle it, or lets it out)."""
        self.request = self._step(lambda: self._call.throw(error))

    def _step(self, step: Callable[[], Request]) -> Request | None:
        try:
            return step()
        except StopIteration as stop:
            self.result = cast(_T, stop.value)
            return None


def like(method: Callable[..., Any], call: Callable[..., Any]) -> None:
    """Give a client's ``method`` the name, docstring and signature of the ``call`` it runs
    (less the namespace, which the client passes itself, and the Call return type)."""
    method.__name__ = call.__name__
    method.__qualname__ = call.__name__
    method.__doc__ = call.__doc__
    signature = inspect.signature(call)
    params = list(signature.parameters.values())
    if params and params[0].name == "ns":
        params = params[1:]
    self_param = inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)
    method.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[self_param, *params], return_annotation=inspect.Signature.empty
    )


def _in_progress(response: httpx.Response) -> bool:
    error = error_from_response(response)
    return error.code == _IN_PROGRESS


def answer_error(response: httpx.Response) -> RemoteError | None:
    """The error an answer stands for (``None``: a success, or 304 Not Modified)."""
    status = response.status_code
    if status >= 400:
        return error_from_response(response)
    if 300 <= status < 400 and status != 304:
        # Not followed: a redirect could lead the key to another host, or to http://.
        where = response.headers.get("location", "")
        return RemoteError(
            f"the server redirects to {where[:200]!r}: give the client the URL it redirects to",
            status=status,
        )
    return None


def part_file(target: Path) -> Path:
    """The temporary file a download is written to before it replaces ``target``."""
    return target.with_name(f".{target.name}.{uuid.uuid4().hex[:12]}.part")
