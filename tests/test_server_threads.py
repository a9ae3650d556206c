"""A request's blocking work makes one trip to a worker thread and back.

Each trip costs a wake-up of a worker thread and one of the event loop, more than the checks
around a route (docs/benchmarks.md, "Server"): a search or an add of a namespace the server
has opened makes one, the library call; the key check, the namespace check and the answer's
validation stay on the event loop.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import anyio.to_thread
import httpx
import pytest

from _server import create_key
from memdir.server.app import create_app
from memdir.server.settings import ServerSettings

NS = "acme.trips"


def _name(func: Any) -> str:
    inner = getattr(func, "func", func)  # a functools.partial
    return str(getattr(inner, "__name__", type(inner).__name__))


def test_a_search_and_an_add_each_make_one_trip_to_a_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    where = str(tmp_path / "ws")
    key = create_key(where, "acme", "write")["key"]
    app = create_app(ServerSettings(workspace=where))
    trips: list[str] = []
    run_sync = anyio.to_thread.run_sync

    async def counted(func: Any, *args: Any, **kwargs: Any) -> Any:
        trips.append(_name(func))
        return await run_sync(func, *args, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", counted)

    async def calls() -> dict[str, tuple[httpx.Response, list[str]]]:
        seen: dict[str, tuple[httpx.Response, list[str]]] = {}
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app),
            base_url="http://memdir",
            headers={"Authorization": f"Bearer {key}"},
        ) as client:
            # The first calls look the key up, create the namespace and measure the tenant's
            # storage: the store, in threads. Then all of that is known.
            await client.post(f"/v1/namespaces/{NS}/memories", json={"text": "a first fact"})
            await client.get(f"/v1/namespaces/{NS}/search", params={"q": "first"})
            trips.clear()
            added = await client.post(
                f"/v1/namespaces/{NS}/memories", json={"text": "The otter team deploys on Friday"}
            )
            seen["add"], trips[:] = (added, list(trips)), []
            found = await client.get(f"/v1/namespaces/{NS}/search", params={"q": "otter Friday"})
            seen["search"] = (found, list(trips))
        return seen

    seen = asyncio.run(calls())
    added, add_trips = seen["add"]
    found, search_trips = seen["search"]
    assert added.status_code == 201, added.text
    assert found.status_code == 200, found.text
    assert [hit["citation"] for hit in found.json()["hits"]] == [added.json()["citation"]]
    assert add_trips == ["add"]
    assert search_trips == ["search"]


def test_a_search_held_in_the_store_does_not_hold_up_other_requests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The route runs in a worker thread: while one search waits on the store, another
    search of the same namespace and an add are answered."""
    from memdir.index import MemoryIndex

    where = str(tmp_path / "ws")
    key = create_key(where, "acme", "write")["key"]
    app = create_app(ServerSettings(workspace=where))
    entered, release = threading.Event(), threading.Event()
    order: list[str] = []
    search = MemoryIndex.search

    def held(self: MemoryIndex, query: str, limit: int = 10) -> Any:
        if "held" in query:
            entered.set()
            # Bounded so that a server which ran the route on its event loop fails the
            # order below instead of hanging the test.
            order.append("held search released" if release.wait(60) else "nobody released")
        return search(self, query, limit)

    monkeypatch.setattr(MemoryIndex, "search", held)

    async def calls() -> list[int]:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app),
            base_url="http://memdir",
            headers={"Authorization": f"Bearer {key}"},
        ) as client:
            first = await client.post(f"/v1/namespaces/{NS}/memories", json={"text": "held fact"})
            assert first.status_code == 201, first.text
            waiting = asyncio.create_task(
                client.get(f"/v1/namespaces/{NS}/search", params={"q": "held"})
            )
            assert await asyncio.to_thread(entered.wait, 60), "the search never reached the store"
            other = await client.get(f"/v1/namespaces/{NS}/search", params={"q": "fact"})
            added = await client.post(f"/v1/namespaces/{NS}/memories", json={"text": "more"})
            order.append("others answered")
            release.set()
            held_answer = await waiting
        return [other.status_code, added.status_code, held_answer.status_code]

    assert asyncio.run(calls()) == [200, 201, 200]
    assert order == ["others answered", "held search released"]
