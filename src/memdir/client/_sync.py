"""``MemdirClient``: a ``memdir serve`` server from Python, with ``httpx.Client``.

Every call is built and parsed by the code :class:`~memdir.client.AsyncMemdirClient` uses too
(:mod:`._ops`, :mod:`._tools`); this module only sends the requests, retries and waits.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Concatenate, ParamSpec, TypeVar

import httpx

from memdir import __version__
from memdir.client import _ops, _ops_jobs, _ops_sessions, _tools
from memdir.client._config import ClientConfig
from memdir.client._errors import ConnectionFailed
from memdir.client._wire import CHUNK, Call, Exchange, Request, Steps, like, part_file
from memdir.errors import WorkspaceError
from memdir.store.namespaces import validate_namespace

__all__ = ["MemdirClient", "NamespaceClient"]

_P = ParamSpec("_P")
_T = TypeVar("_T")


def _client_call(call: Callable[_P, Call[_T]]) -> Callable[Concatenate[MemdirClient, _P], _T]:
    def method(self: MemdirClient, /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
        return self._run(call(*args, **kwargs))

    like(method, call)
    return method


def _namespace_call(
    call: Callable[Concatenate[str, _P], Call[_T]],
) -> Callable[Concatenate[NamespaceClient, _P], _T]:
    def method(self: NamespaceClient, /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
        return self.client._run(call(self.name, *args, **kwargs))

    like(method, call)
    return method


class MemdirClient:
    """A client of a ``memdir serve`` server.

    Args:
        url: the server's URL (``https://memory.example.com``; ``http://`` only to loopback,
            unless ``MEMDIR_ALLOW_INSECURE_HTTP=1``).
        api_key: the key (``memdir keys create``); default ``$MEMDIR_API_KEY``, else the
            file named by ``$MEMDIR_API_KEY_FILE``.
        timeout: seconds an ordinary request may take.
        job_timeout: seconds a job (flush, compact, consolidate, maintenance, export,
            import) may take.
        retries: attempts after the first when the server cannot be reached, the answer is
            lost, or it answers 429, 502, 503 or 504.
        backoff: the first wait between attempts in seconds (doubling, with jitter).
        max_wait: the longest ``Retry-After`` waited for; longer, the error is raised.
        transport: an ``httpx`` transport (tests, proxies, Unix sockets).

    Raises:
        ConfigError: a bad URL or setting, no key, or ``http://`` to another host.

    Example::

        with MemdirClient("https://memory.example.com") as client:
            alice = client.namespace("acme.alice")
            alice.add("Wang Lei prefers PostgreSQL 16")
            print(alice.memory_search("database"))
    """

    def __init__(
        self,
        url: str,
        api_key: str | None = None,
        *,
        timeout: float = 30.0,
        job_timeout: float = 330.0,
        retries: int = 4,
        backoff: float = 0.5,
        max_wait: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._config = ClientConfig.resolve(
            url,
            api_key,
            timeout=timeout,
            job_timeout=job_timeout,
            retries=retries,
            backoff=backoff,
            max_wait=max_wait,
        )
        self._http = httpx.Client(
            base_url=self._config.base_url,
            transport=transport,
            headers={"User-Agent": f"memdir-client/{__version__}"},
        )

    @property
    def url(self) -> str:
        """The server's URL."""
        return self._config.base_url

    def __repr__(self) -> str:
        return f"MemdirClient({self.url!r})"

    def namespace(self, name: str) -> NamespaceClient:
        """The calls of one namespace (``acme.alice``); nothing is sent yet.

        Raises:
            ConfigError: ``name`` is not a valid namespace name.
        """
        return NamespaceClient(self, validate_namespace(name))

    def close(self) -> None:
        """Close the connections."""
        self._http.close()

    def __enter__(self) -> MemdirClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _run(self, call: Call[_T]) -> _T:
        steps = Steps(call)
        while (request := steps.request) is not None:
            try:
                response = self._exchange(request)
            except ConnectionFailed as exc:
                steps.fail(exc)
            else:
                steps.answer(response)
        return steps.result

    def _exchange(self, request: Request) -> httpx.Response:
        exchange = Exchange(request, self._config)
        while True:
            try:
                response = self._attempt(exchange)
            except httpx.RequestError as exc:
                wait = exchange.after_failure(exc)
            else:
                again = exchange.after_answer(response)
                if again is None:
                    return response
                wait = again
            time.sleep(wait)

    def _attempt(self, exchange: Exchange) -> httpx.Response:
        request = exchange.request
        upload = _chunks(request.upload) if request.upload is not None else None
        response = self._http.send(exchange.build(self._http, upload), stream=True)
        try:
            if request.download is not None and response.is_success:
                _save(response, request.download)
            else:
                response.read()
        finally:
            response.close()
        return response

    whoami = _client_call(_ops.whoami)
    namespaces = _client_call(_ops.namespaces)


class NamespaceClient:
    """The calls of one namespace on a server (``MemdirClient.namespace(name)``).

    The ``memory_*`` and ``session_*`` calls return the text the tools of
    :mod:`memdir.tools` return on the same store (errors as ``Error: ...`` text, never
    raised), for an agent's tool loop; the others return the library's types and raise
    :class:`~memdir.client.RemoteError` subclasses.

    Attributes:
        client: the client it sends through.
        name: the namespace.
    """

    def __init__(self, client: MemdirClient, name: str) -> None:
        self.client = client
        self.name = name

    def __repr__(self) -> str:
        return f"NamespaceClient({self.client.url!r}, {self.name!r})"

    # The tools' text.
    memory_search = _namespace_call(_tools.memory_search)
    memory_get = _namespace_call(_tools.memory_get)
    memory_add = _namespace_call(_tools.memory_add)
    session_search = _namespace_call(_tools.session_search)
    session_list = _namespace_call(_tools.session_list)
    session_history = _namespace_call(_tools.session_history)
    # Memory.
    add = _namespace_call(_ops.add)
    search = _namespace_call(_ops.search)
    excerpt = _namespace_call(_ops.excerpt)
    ledgers = _namespace_call(_ops.ledgers)
    ledger = _namespace_call(_ops.ledger)
    read_memory_md = _namespace_call(_ops.read_memory_md)
    replace_memory_md = _namespace_call(_ops_jobs.replace_memory_md)
    consolidations = _namespace_call(_ops.consolidations)
    # Sessions.
    append_messages = _namespace_call(_ops_sessions.append_messages)
    sessions = _namespace_call(_ops_sessions.sessions)
    session_messages = _namespace_call(_ops_sessions.session_messages)
    search_sessions = _namespace_call(_ops_sessions.search_sessions)
    # Jobs and transfers, run on the server.
    flush = _namespace_call(_ops_jobs.flush)
    compact = _namespace_call(_ops_jobs.compact)
    consolidate = _namespace_call(_ops_jobs.consolidate)
    maintenance = _namespace_call(_ops_jobs.maintenance)
    run_maintenance = _namespace_call(_ops_jobs.run_maintenance)
    export = _namespace_call(_ops_jobs.export)
    import_ = _namespace_call(_ops_jobs.import_)


def _chunks(path: Path) -> Iterator[bytes]:
    try:
        with path.open("rb") as file:
            while chunk := file.read(CHUNK):
                yield chunk
    except OSError as exc:
        raise WorkspaceError(f"cannot read {path}: {exc.strerror or exc}") from None


def _save(response: httpx.Response, target: Path) -> None:
    part = part_file(target)
    try:
        with part.open("wb") as file:
            for chunk in response.iter_bytes(CHUNK):
                file.write(chunk)
        os.replace(part, target)
    except OSError as exc:
        part.unlink(missing_ok=True)
        raise WorkspaceError(f"cannot save to {target}: {exc.strerror or exc}") from None
    except BaseException:
        part.unlink(missing_ok=True)
        raise
