"""Every route has a policy, a key check and (for a namespace) the grant check, by
construction: this walks the application's routes and fails if one escapes, then runs the
authorisation matrix over every route of a real server on each store."""

from __future__ import annotations

import inspect
import io
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import APIRouter, FastAPI
from fastapi.routing import APIRoute
from starlette.routing import Route

from _server import Served, serve_store
from memdir.server.app import create_app
from memdir.server.auth import Scope
from memdir.server.mcp_http import McpEndpoint
from memdir.server.policy import (
    MemdirRouter,
    Policy,
    PolicyRoute,
    PrincipalGuard,
    bound_namespace,
)
from memdir.server.settings import ServerSettings
from memdir.server.ui._session import viewer_of

PUBLIC = {"/healthz", "/readyz", "/metrics"}  # /metrics: its own token or loopback
NOT_API = {"/openapi.json"}  # FastAPI's own document (no memory in it)
# Endpoints that are not API routes, and what they must be: /mcp checks the key and the
# namespace itself (tests/test_server_mcp.py), then hands over to the MCP SDK.
ALLOWED_ENDPOINTS: dict[str, type] = {"/mcp": McpEndpoint}
WRITE_METHODS = {"POST", "PUT", "PATCH", "DELETE"}
ROUTES_DIR = Path(__file__).parent.parent / "src" / "memdir" / "server" / "routes"


def _calls(dependant: Any) -> Iterator[Any]:
    for sub in dependant.dependencies:
        yield sub.call
        yield from _calls(sub)


# The web UI's pages authenticate with the session cookie (memdir.server.ui._session), not
# a bearer key: these are the only ones without a session (the login itself, static files,
# the redirect of /ui and the 404 page of an unknown address).
UI_PUBLIC = {"/ui", "/ui/login", "/ui/logout", "/ui/static/{name}", "/ui/{rest:path}"}


def ui_violations(route: APIRoute) -> list[str]:
    """What breaks the UI's page policy: a page without the session dependency, a page of a
    namespace that does not open it through ui_namespace, a form without its CSRF check."""
    path = route.path
    if path in UI_PUBLIC:
        return []
    found = []
    source = inspect.getsource(route.endpoint)
    if viewer_of not in list(_calls(route.dependant)):
        found.append(f"{path}: a page without the session check")
    if "{ns}" in path and "ui_namespace(" not in source:
        found.append(f"{path}: the namespace is not opened by ui_namespace")
    if set(route.methods or ()) & WRITE_METHODS and "read_form(" not in source:
        found.append(f"{path}: a form without the CSRF check (read_form)")
    return found


def violations(app: FastAPI) -> list[str]:
    """What breaks the route policy, one line per problem (empty: none)."""
    found: list[str] = []
    for route in app.routes:
        path = getattr(route, "path", "?")
        if isinstance(route, APIRoute) and (path == "/ui" or path.startswith("/ui/")):
            found.extend(ui_violations(route))
            continue
        if not isinstance(route, APIRoute):
            allowed = ALLOWED_ENDPOINTS.get(path)
            if allowed is not None:
                if not (isinstance(route, Route) and isinstance(route.endpoint, allowed)):
                    found.append(f"{path}: not the {allowed.__name__} it must be")
            elif path not in NOT_API:
                found.append(f"{path}: not an API route and not allowed")
            continue
        if not isinstance(route, PolicyRoute):
            found.append(f"{path}: has no policy (not a PolicyRoute)")
            continue
        policy = route.policy
        first = route.dependant.dependencies[0].call if route.dependant.dependencies else None
        if not (isinstance(first, PrincipalGuard) and first.policy is policy):
            found.append(f"{path}: the key check is not the first dependency")
        if policy.scope is None and path not in PUBLIC:
            found.append(f"{path}: public but not in the allow-list")
        methods = set(route.methods or ())
        if policy.scope == Scope.READ and methods - {"GET", "HEAD"}:
            found.append(f"{path}: a read-scope route takes {sorted(methods)}")
        if methods & WRITE_METHODS and (policy.scope is None or policy.scope < Scope.WRITE):
            found.append(f"{path}: a write method without write scope")
        if methods & WRITE_METHODS and not (policy.idempotent or policy.streamed):
            found.append(f"{path}: a write that takes no Idempotency-Key")
        if "{ns}" in path:
            if bound_namespace not in list(_calls(route.dependant)):
                found.append(f"{path}: the namespace is not checked by bound_namespace")
            if "ns" in inspect.signature(route.endpoint).parameters:
                found.append(f"{path}: the handler takes the raw namespace")
    return found


def test_every_route_of_the_application_keeps_the_policy(tmp_path: Path) -> None:
    app = create_app(ServerSettings(workspace=str(tmp_path / "ws")))
    assert violations(app) == []
    scoped = [r for r in app.routes if isinstance(r, PolicyRoute) and r.policy.scope]
    assert len(scoped) >= 13  # the walk saw the routes


def test_the_walk_finds_each_kind_of_escape() -> None:
    def search(ns: str) -> dict[str, str]:
        return {"ns": ns}

    def write() -> None:
        return None

    plain = APIRouter()
    plain.add_api_route("/v1/open", write, methods=["GET"])
    plain.routes.append(Route("/mcp", write))  # a plain endpoint where /mcp must be
    router = MemdirRouter()
    router.add("POST", "/v1/readwrite", write, policy=Policy(scope=Scope.READ))
    router.add("GET", "/v1/namespaces/{ns}/raw", search, policy=Policy(scope=Scope.READ))
    router.add("GET", "/v1/status", write, policy=Policy(scope=None))
    pages = APIRouter()
    pages.add_api_route("/ui/open", write, methods=["GET"])
    pages.add_api_route("/ui/ns/{ns}/raw", search, methods=["GET"])
    pages.add_api_route("/ui/form", write, methods=["POST"])
    app = FastAPI(routes=[*plain.routes, *router.routes, *pages.routes])
    found = "\n".join(violations(app))
    for expected in (
        "/v1/open: has no policy",
        "/v1/readwrite: a read-scope route takes ['POST']",
        "/v1/readwrite: a write method without write scope",
        "/v1/readwrite: a write that takes no Idempotency-Key",
        "/v1/namespaces/{ns}/raw: the namespace is not checked",
        "/v1/namespaces/{ns}/raw: the handler takes the raw namespace",
        "/v1/status: public but not in the allow-list",
        "/mcp: not the McpEndpoint it must be",
        "/ui/open: a page without the session check",
        "/ui/ns/{ns}/raw: the namespace is not opened by ui_namespace",
        "/ui/form: a form without the CSRF check",
    ):
        assert expected in found


def test_a_route_cannot_be_added_without_a_policy() -> None:
    router = MemdirRouter()
    with pytest.raises(TypeError):
        router.get("/v1/x")(lambda: None)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="exactly one policy"):
        PolicyRoute("/v1/x", lambda: None)


def test_handlers_reach_the_store_only_through_the_bound_namespace() -> None:
    sources = sorted(ROUTES_DIR.glob("*.py"))
    assert sources
    for source in sources:
        text = source.read_text()
        for forbidden in ("Workspace(", ".namespaced(", ".coerce(", "open_key_store"):
            assert forbidden not in text, f"{source.name} uses {forbidden}"


# -- the matrix, over real HTTP ----------------------------------------------------------------


def _archive_of(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for name, data in files.items():
            member = tarfile.TarInfo(name)
            member.size = len(data)
            tar.addfile(member, io.BytesIO(data))
    return out.getvalue()


NS = "acme.matrix"
LOCK_TOKEN = "6f1c1a52-5a49-4a44-9a43-8d2f0b7e2d10"
DAYS: dict[str, str] = {}
"""Per store, the day of the ledger the fixture's add wrote (the server's day, even at midnight)."""
# An example request for every route that needs a key: (query, JSON body).
EXAMPLES: dict[str, tuple[dict[str, Any], Any]] = {
    "whoami": ({}, None),
    "list_namespaces": ({}, None),
    "add": ({}, {"text": "matrix fact"}),
    "search": ({"q": "matrix"}, None),
    "excerpt": ({"path": "MEMORY.md"}, None),
    "ledgers": ({}, None),
    "ledger": ({}, None),
    "memory_md": ({}, None),
    "consolidations": ({}, None),
    "append_messages": ({}, {"messages": [{"role": "user", "content": "hi", "id": "m1"}]}),
    "session_messages": ({}, None),
    "sessions": ({}, None),
    "search_sessions": ({"q": "hi"}, None),
    "put_memory_md": ({}, None),
    "flush": ({}, {"session_id": "s1", "messages": [{"role": "user", "content": "hi"}]}),
    "compact": ({}, {"session_id": "s1", "messages": [{"role": "user", "content": "hi"}]}),
    "consolidate": ({}, {"dry_run": True}),
    "maintenance_status": ({}, None),
    "run_maintenance": ({}, {"dry_run": True}),
    "export_archive": ({}, None),
    "import_archive": ({}, None),
    "store_info": ({}, None),
    "create_store": ({}, None),
    "read_file": ({}, None),
    "stat_file": ({}, None),
    "write_file": ({}, None),
    "append_file": ({}, None),
    "delete_file": ({}, None),
    "list_top": ({}, None),
    "list_dir": ({}, None),
    "take_lock": ({}, {"token": LOCK_TOKEN}),
    "renew_lock": ({}, {"token": LOCK_TOKEN}),
    "release_lock": ({"token": LOCK_TOKEN}, None),
    "delete_namespace": ({}, None),
}
# More of a route's example request than a query and a JSON body (headers, a raw body).
EXTRAS: dict[str, dict[str, Any]] = {
    "put_memory_md": {
        "headers": {"If-None-Match": "*", "Content-Type": "text/markdown"},
        "content": b"# Memory\n",  # what a new namespace holds: a success, writing nothing
    },
    "import_archive": {
        "headers": {"Content-Type": "application/gzip"},
        "content": _archive_of({"MEMORY.md": b"# Memory\n"}),  # the same: nothing written
    },
    "write_file": {"content": b"- matrix\n"},
    "append_file": {"content": b"- matrix\n"},
}
PATH_PARAMS = {
    "ns": NS,
    "session_id": "s1",
    "path": "notes/matrix.md",
    "name": "matrix",
}
# A route whose example needs other path parameters than PATH_PARAMS.
DOOMED = "acme.doomed"
"""The namespace the owner's call of ``delete_namespace`` erases (the others stay)."""
ROUTE_PATH_PARAMS = {"list_dir": {"path": "notes"}, "delete_namespace": {"ns": DOOMED}}


@pytest.fixture(scope="module", params=["files", "postgres"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    for served in serve_store(request, tmp_path_factory):
        with served.client("acme_write") as client:  # what the read routes read
            added = client.post(f"/v1/namespaces/{NS}/memories", json={"text": "x"})
            assert added.is_success
            DAYS[served.store] = Path(added.json()["path"]).stem
            messages = EXAMPLES["append_messages"][1]
            assert client.post(f"/v1/namespaces/{NS}/sessions/s1/messages", json=messages)
            note = f"/v1/namespaces/{NS}/store/files/notes/matrix.md"
            assert client.put(note, content=b"- matrix\n").is_success
            doomed = f"/v1/namespaces/{DOOMED}/memories"
            assert client.post(doomed, json={"text": "doomed fact"}).is_success
        yield served


def _scoped_routes(tmp_path: Path) -> list[PolicyRoute]:
    app = create_app(ServerSettings(workspace=str(tmp_path / "ws")))
    return [r for r in app.routes if isinstance(r, PolicyRoute) and r.policy.scope is not None]


def test_every_route_answers_the_authorisation_matrix(served: Served, tmp_path: Path) -> None:
    routes = _scoped_routes(tmp_path)
    missing = sorted({r.name for r in routes} - set(EXAMPLES))
    assert not missing, f"add an example request for {missing}"
    below = {Scope.WRITE: "acme_read", Scope.ADMIN: "acme_write"}
    owner = {Scope.READ: "acme_read", Scope.WRITE: "acme_write", Scope.ADMIN: "acme_admin"}
    for route in routes:
        query, body = EXAMPLES[route.name]
        extra = EXTRAS.get(route.name, {})
        template = route.path.replace("{path:path}", "{path}")
        params = {**PATH_PARAMS, "day": DAYS[served.store], **ROUTE_PATH_PARAMS.get(route.name, {})}
        path = template.format(**{k: v for k, v in params.items() if f"{{{k}}}" in template})
        (method,) = route.methods
        scope = route.policy.scope
        assert scope is not None
        with served.client() as anonymous:
            response = anonymous.request(method, path, params=query, json=body, **extra)
            assert response.status_code == 401, (route.name, response.text)
        if scope in below:
            with served.client(below[scope]) as weaker:
                response = weaker.request(method, path, params=query, json=body, **extra)
                assert response.status_code == 403, (route.name, response.text)
        if "{ns}" in route.path:
            stranger = "beta_admin" if scope == Scope.ADMIN else "beta_write"
            with served.client(stranger) as other:
                response = other.request(method, path, params=query, json=body, **extra)
                assert response.status_code == 404, (route.name, response.text)
                assert response.json()["code"] == "namespace-not-found"
        with served.client(owner[scope]) as allowed:
            response = allowed.request(method, path, params=query, json=body, **extra)
            assert response.is_success, (route.name, response.text)


def test_a_namespace_deleted_over_http_is_gone_and_the_others_stay(served: Served) -> None:
    gone = "acme.gone"
    with served.client("acme_write") as writer:
        assert writer.post(f"/v1/namespaces/{gone}/memories", json={"text": "gone fact"})
        kept = {"text": "The ferret enclosure is cleaned on Tuesdays."}
        assert writer.post(f"/v1/namespaces/{NS}/memories", json=kept).is_success
    with served.client("acme_admin") as admin:
        answer = admin.delete(f"/v1/namespaces/{gone}")
        assert answer.status_code == 200, answer.text
        assert answer.json()["name"] == gone and answer.json()["files"] > 0
        assert admin.get(f"/v1/namespaces/{gone}/ledgers").status_code == 404
        assert admin.delete(f"/v1/namespaces/{gone}").status_code == 404
        names = [n["name"] for n in admin.get("/v1/namespaces").json()["items"]]
        assert gone not in names and NS in names
        found = admin.get(f"/v1/namespaces/{NS}/search", params={"q": "ferret enclosure"})
        assert found.is_success and "Tuesdays" in found.text
