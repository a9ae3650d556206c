"""Where a ``memdir serve`` request's time goes: each part of the server timed by wrapping it.

Run as ``python benchmarks/_server_profile.py OUT.json serve -w ... [options]``: the server
runs as ``memdir serve`` does (one worker: uvicorn in this process), with timers wrapped around
the parts a request goes through (:func:`install`): uvicorn's request parsing and response
writing, the application, each middleware, the routing, the dependencies (the key check, the
guards), the hand-off of each synchronous dependency and of the route to a worker thread, the
route and the library calls inside it, the response's validation and its JSON. Between SIGUSR1
and SIGUSR2 every timer adds its wall time; on exit (SIGTERM) the totals and counts are
written to OUT.json. With one request at a time the timers of a request never overlap another
request's, so the totals divided by the requests are the mean time of each part, and the
difference of an outer part and the parts inside it is its own.

A timer costs about a microsecond, and a request passes about twenty of them.
"""

from __future__ import annotations

import functools
import json
import signal
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["install", "totals"]

_TOTALS: defaultdict[str, list[float]] = defaultdict(lambda: [0.0, 0])
_RECORDING = threading.Event()
_DEPTH = threading.local()


def totals() -> dict[str, tuple[float, int]]:
    """Seconds and calls of each timer so far."""
    return {name: (t[0], int(t[1])) for name, t in _TOTALS.items()}


def _add(name: str, seconds: float) -> None:
    if _RECORDING.is_set():
        found = _TOTALS[name]
        found[0] += seconds
        found[1] += 1


def _timed(name: str, fn: Callable[..., Any], *, outermost: bool = False) -> Callable[..., Any]:
    """``fn`` (sync or async) timed as ``name``; ``outermost``: not when called inside
    another call of a timer of the same name (the library calling itself)."""
    import inspect

    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def timed_async(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return await fn(*args, **kwargs)
            finally:
                _add(name, time.perf_counter() - started)

        return timed_async

    @functools.wraps(fn)
    def timed(*args: Any, **kwargs: Any) -> Any:
        depth = getattr(_DEPTH, name, 0)
        if outermost and depth:
            return fn(*args, **kwargs)
        setattr(_DEPTH, name, depth + 1)
        started = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            _add(name, time.perf_counter() - started)
            setattr(_DEPTH, name, depth)

    return timed


def _patch(owner: Any, attribute: str, name: str, **options: Any) -> None:
    setattr(owner, attribute, _timed(name, getattr(owner, attribute), **options))


def _threadpool(original: Callable[..., Any], routes: set[Any]) -> Callable[..., Any]:
    """``anyio.to_thread.run_sync``, timed: all of it (the hand-off to a worker thread and
    back), and the call inside the thread. Every trip goes through it: Starlette's
    ``run_in_threadpool`` (FastAPI's synchronous dependencies, routes and response
    validation) and the server's own (its routes, a namespace's first look at the store).
    ``routes``: the route functions, whose trips are labelled ``route``."""

    async def run_sync(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        inner = getattr(func, "func", func)  # a functools.partial
        keywords = getattr(func, "keywords", {})
        if "function" in keywords:  # FastAPI's _run_sync_endpoint(function=...)
            inner = keywords["function"]
        label = "route" if inner in routes else getattr(inner, "__name__", "dependency")
        started = time.perf_counter()
        try:
            return await original(_timed(f"in thread: {label}", func), *args, **kwargs)
        finally:
            _add(f"thread call: {label}", time.perf_counter() - started)

    return run_sync


def install() -> None:
    """Wrap the timers around the server's parts (before the application is made)."""
    import anyio.to_thread
    import fastapi.routing
    import starlette.responses
    import starlette.routing
    from uvicorn.protocols.http import h11_impl

    import memdir.server.app
    import memdir.server.policy
    import memdir.server.routes.memory
    from memdir.index import MemoryIndex
    from memdir.server import accesslog, limits, metrics, problems

    _patch(h11_impl.H11Protocol, "data_received", "http: parse (uvicorn, h11)")
    _patch(h11_impl.RequestResponseCycle, "send", "http: write (uvicorn, h11)")
    _patch(accesslog.AccessLogMiddleware, "__call__", "middleware: access log")
    _patch(accesslog.AccessLogMiddleware, "_line", "access log: line")
    _patch(accesslog.logger, "info", "access log: write")
    _patch(metrics.MetricsMiddleware, "__call__", "middleware: metrics")
    _patch(problems.InternalErrorMiddleware, "__call__", "middleware: errors")
    _patch(limits.BodyLimitMiddleware, "__call__", "middleware: body limit")
    _patch(starlette.routing.Router, "__call__", "routing")
    _patch(fastapi.routing, "solve_dependencies", "dependencies")
    _patch(fastapi.routing, "serialize_response", "response: validate, to JSON")
    _patch(starlette.responses.JSONResponse, "render", "response: JSON text")
    _patch(memdir.server.policy.PrincipalGuard, "__call__", "auth")
    _patch(memdir.server.policy, "admit", "guards: rate, in flight")
    _patch(memdir.server.policy, "before_write", "guards: idempotency, quota")
    for attribute in ("refresh", "search"):
        _patch(MemoryIndex, attribute, "library", outermost=True)
    for attribute in ("shared_index", "add_memory"):
        _patch(memdir.server.routes.memory, attribute, "library", outermost=True)
    routes = {
        getattr(route.endpoint, "__wrapped__", route.endpoint)
        for route in memdir.server.routes.memory.router.routes
    }
    anyio.to_thread.run_sync = _threadpool(anyio.to_thread.run_sync, routes)  # type: ignore[assignment]
    original_guarded = memdir.server.policy.guarded
    memdir.server.policy.guarded = lambda handler: _timed(  # type: ignore[assignment]
        "route handler", original_guarded(handler)
    )
    make = memdir.server.app.app_from_env

    def app_from_env() -> Any:
        app = make()

        async def timed_app(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            started = time.perf_counter()
            try:
                await app(scope, receive, send)
            finally:
                _add("application", time.perf_counter() - started)

        return timed_app

    memdir.server.app.app_from_env = app_from_env  # type: ignore[assignment]


def main() -> None:
    """``_server_profile.py OUT.json serve ...``: serve, timed, until SIGTERM."""
    out = Path(sys.argv[1])
    install()
    signal.signal(signal.SIGUSR1, lambda *_: _RECORDING.set())
    signal.signal(signal.SIGUSR2, lambda *_: _RECORDING.clear())
    from memdir.cli import cli

    try:
        cli(args=sys.argv[2:], prog_name="memdir")
    finally:
        out.write_text(json.dumps(totals(), indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
