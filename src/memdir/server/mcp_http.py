"""MCP over streamable HTTP at ``/mcp``: the memory tools for many tenants, behind the same keys
as the REST API.

A request passes :class:`McpEndpoint` first. It authenticates the bearer key as every REST
route does (the same :class:`~memdir.server.auth.KeyAuthenticator`, cache and revocation),
then fixes the namespace of the request: the key's own when the key reaches exactly one, else
the ``namespace`` query parameter (``/mcp?namespace=acme.alice``), checked as
:func:`~memdir.server.policy.bound_namespace` checks a path's (a name that can never exist is
422; a name out of the key's reach is the same 404 as a namespace that does not exist), before
anything is read. It then hands the request to one of two servers of the MCP SDK: the full one
(six tools) for write and admin keys, a read-only one (no ``memory_add``) for read keys.

Each SDK server checks the key again through its own bearer-token support
(:class:`KeyTokenVerifier`, the SDK's ``AuthSettings`` and ``RequireAuthMiddleware``): a
request without a valid key, or with a revoked or expired one, gets the SDK's 401 with its
``WWW-Authenticate`` challenge, whichever server answers. The tools are
:func:`memdir.mcp.create_server`'s, so their names, arguments and answers are those of stdio;
none takes a namespace, so no argument can name or widen one. Every tool call asks
:meth:`McpEndpoint.workspace` for its workspace, which reads the binding the endpoint set for
this request (a context variable, which the SDK carries into the tool's thread) and the SDK's
access token, and refuses the call unless both are there and agree (fail closed).

The servers are stateless and answer JSON: any replica answers any request, with no session
to keep. Bodies holding lone UTF-16 surrogates are repaired as on stdio
(:class:`~memdir._mcp_wire.ValidUnicodeBodies`).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Final

from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from memdir._mcp_wire import ValidUnicodeBodies
from memdir.errors import ConfigError, MemdirError
from memdir.mcp import create_server
from memdir.server.auth import AuthError, Principal
from memdir.server.auth import Scope as KeyScope
from memdir.server.limits import RateLimited, TooManyInFlight
from memdir.server.policy import authenticate, check_reach
from memdir.server.problems import InvalidInput, ProblemError, problem_response
from memdir.server.quotas import QuotaExceeded
from memdir.server.state import ServerState
from memdir.store.workspace import Workspace

__all__ = ["MCP_PATH", "Binding", "KeyTokenVerifier", "McpEndpoint", "access_token", "bind"]

MCP_PATH: Final = "/mcp"
_SDK_HINT: Final = "MCP over HTTP needs the mcp SDK 2.3 or later: pip install 'memdir[server]'"
# The SDK's AuthSettings require an issuer URL; memdir issues its own keys, so nothing reads
# it (no OAuth metadata is served without a resource_server_url).
_ISSUER: Final = "http://127.0.0.1"
logger = logging.getLogger("memdir.server")
_POST_ONLY: Final = ProblemError(
    405,
    "method-not-allowed",
    "MCP here is stateless: POST each JSON-RPC message to /mcp (no session, no event stream)",
    headers={"Allow": "POST"},
)

try:
    from mcp.server.auth.middleware.auth_context import get_access_token
    from mcp.server.auth.provider import AccessToken
    from mcp.server.auth.settings import AuthSettings
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.server.transport_security import TransportSecuritySettings
except ImportError:  # pragma: no cover - the server extra requires mcp>=2.3
    _SDK_MISSING = True
else:
    _SDK_MISSING = False


@dataclass(frozen=True, slots=True)
class Binding:
    """Who is calling and the namespace their request is bound to.

    Attributes:
        principal: the caller, as its key authenticated it.
        ns: the namespace every tool call of the request works on.
    """

    principal: Principal
    ns: str


_BINDING: ContextVar[Binding | None] = ContextVar("memdir_mcp_binding", default=None)


@contextlib.contextmanager
def bind(principal: Principal, ns: str) -> Iterator[Binding]:
    """Bind what runs inside (this task, and the tool calls the SDK makes for it) to
    ``principal`` and namespace ``ns``: a context variable, so concurrent requests each see
    their own."""
    binding = Binding(principal, ns)
    token = _BINDING.set(binding)
    try:
        yield binding
    finally:
        _BINDING.reset(token)


def access_token(token: str, principal: Principal) -> AccessToken:
    """The SDK's view of an authenticated key: its id as client id, its scopes (each scope
    with the ones it includes), the tenant as subject, and its expiry."""
    expires = principal.expires_at
    return AccessToken(
        token=token,
        client_id=principal.key_id,
        scopes=[scope.label for scope in KeyScope if principal.scope >= scope],
        expires_at=int(expires.timestamp()) if expires is not None else None,
        subject=principal.tenant,
        claims={"tenant": principal.tenant, "prefix": principal.grant.prefix},
    )


class KeyTokenVerifier:
    """The SDK's ``TokenVerifier`` over memdir's keys.

    Args:
        state: the server whose authenticator checks the keys.
    """

    def __init__(self, state: ServerState) -> None:
        self.state = state

    async def verify_token(self, token: str) -> AccessToken | None:
        """The access token of a valid key; ``None`` (the SDK's 401) for any other."""
        try:
            principal = await authenticate(self.state, token)
        except (AuthError, ProblemError):
            return None
        return access_token(token, principal)


def _bearer(scope: Scope) -> str | None:
    """The bearer token of the request, read as the SDK's ``BearerAuthBackend`` reads it, so
    that both checks see the same token."""
    for key, value in scope.get("headers", []):
        if key.lower() == b"authorization":
            header = str(value.decode("latin-1"))
            return header[7:] if header.lower().startswith("bearer ") else ""
    return None


class McpEndpoint:
    """The ASGI endpoint at ``/mcp``: binds each request to its key and namespace, then hands
    it to the SDK server the key's scope allows.

    Args:
        state: the server's state (its authenticator, namespaces and settings).

    Raises:
        ConfigError: the installed ``mcp`` SDK is older than 2.3.
    """

    def __init__(self, state: ServerState) -> None:
        if _SDK_MISSING:
            raise ConfigError(_SDK_HINT)
        self.state = state
        verifier = KeyTokenVerifier(state)
        # Read keys get the read-only server; the full one needs the write scope, so a read
        # key that reached it anyway would get the SDK's 403.
        self._sdk_full = self._server(verifier, read_only=False)
        self._sdk_read = self._server(verifier, read_only=True)
        self._full = self._http_app(self._sdk_full)
        self._read = self._http_app(self._sdk_read)
        self.route = Route(MCP_PATH, endpoint=self)
        """The application's route to this endpoint (every method: the SDK answers them)."""

    def _server(self, verifier: KeyTokenVerifier, *, read_only: bool) -> Any:
        auth = AuthSettings(
            issuer_url=_ISSUER,  # type: ignore[arg-type]  # pydantic validates the string
            resource_server_url=None,
            required_scopes=[(KeyScope.READ if read_only else KeyScope.WRITE).label],
        )
        return create_server(
            resolve=self.workspace,
            read_only=read_only,
            sdk_options={"token_verifier": verifier, "auth": auth},
        )

    @staticmethod
    def _http_app(server: Any) -> ASGIApp:
        app = server.streamable_http_app(
            streamable_http_path=MCP_PATH,
            json_response=True,
            stateless_http=True,
            # Every request carries a bearer key, which a page that rebinds a DNS name to
            # this server does not have; a Host check would only refuse the names a proxy
            # in front of the server forwards.
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        return ValidUnicodeBodies(app)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Run the SDK servers' request handling (in the application's lifespan: a mounted
        SDK application's own lifespan does not run)."""
        async with self._sdk_full.session_manager.run(), self._sdk_read.session_manager.run():
            yield

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope["route"] = self.route  # the access log's route (FastAPI sets it only for its own)
        inner = dict(scope)  # what the SDK application writes into its scope stays there
        try:
            principal = await authenticate(self.state, _bearer(scope))
        except AuthError:
            await self._full(inner, receive, send)  # the SDK answers its 401 and challenge
            return
        except ProblemError as exc:
            await self._refuse(scope, receive, send, exc)
            return
        scope.setdefault("state", {})["principal"] = principal  # for the access log
        if scope.get("method") != "POST":
            # Stateless: no session to end (DELETE), and no event stream to open (GET): the
            # SDK would hold a GET open for ever, with nothing ever sent on it.
            await self._refuse(scope, receive, send, _POST_ONLY)
            return
        try:
            ns = _namespace(scope, principal)
        except ProblemError as exc:
            await self._refuse(scope, receive, send, exc)
            return
        # The access log hashes (or, if asked, names) the namespace as for a REST route.
        scope["path_params"] = {**scope.get("path_params", {}), "ns": ns}
        limiter = self.state.limiter
        wait = limiter.take(principal.tenant)  # the tenant's rate and place in flight, as REST
        if wait > 0:
            await self._refuse(scope, receive, send, RateLimited(limiter.rate, limiter.burst, wait))
            return
        if not limiter.enter(principal.tenant):
            await self._refuse(scope, receive, send, TooManyInFlight(limiter.inflight))
            return
        app = self._full if principal.scope >= KeyScope.WRITE else self._read
        try:
            with bind(principal, ns):
                await app(inner, receive, send)
        finally:
            limiter.leave(principal.tenant)

    @staticmethod
    async def _refuse(scope: Scope, receive: Receive, send: Send, exc: ProblemError) -> None:
        response = problem_response(
            Request(scope), exc.status, exc.code, exc.detail, headers=dict(exc.headers or {})
        )
        await response(scope, receive, send)

    def workspace(self, write: bool) -> Workspace:
        """The workspace of the tool call being made (``write``: the tool writes).

        Raises:
            ToolError: the call is not bound to a key, or the key may not do this, or the
                namespace does not exist yet and the call only reads.
        """
        binding = _BINDING.get()
        token = get_access_token()
        if binding is None or token is None or token.client_id != binding.principal.key_id:
            raise ToolError("this call is not bound to an API key; send it to /mcp with one")
        principal, ns = binding.principal, binding.ns
        if write and KeyScope.WRITE.label not in token.scopes:
            raise ToolError(f"the API key {principal.key_id} may only read")
        if not principal.grant.allows(ns):  # checked at the door already; kept as a guard
            raise ToolError(f"no namespace {ns!r}")
        try:
            ws = self.state.pool.get(ns, create=False)
            if ws is None and write:  # a write creates it, within the tenant's quota
                usage = self.state.usage
                usage.check_new_namespace(principal.tenant)
                ws = self.state.pool.get(ns, create=True)
                usage.add(principal.tenant, namespaces=1)
        except QuotaExceeded as exc:
            raise ToolError(exc.detail) from None
        except MemdirError as exc:
            logger.warning("MCP: cannot open a namespace (%s): %s", type(exc).__name__, exc)
            raise ToolError("the store cannot be reached; try again soon") from None
        if ws is None:
            raise ToolError(f"no namespace {ns!r} yet: adding a memory creates it")
        return ws


def _namespace(scope: Scope, principal: Principal) -> str:
    """The namespace a request is bound to: the key's own, else the ``namespace`` query
    parameter; checked against the name rules (422) and the key's grant (404), before
    anything is read."""
    given = QueryParams(scope.get("query_string", b"")).getlist("namespace")
    if len(given) > 1:
        raise InvalidInput("give the namespace once: /mcp?namespace=NAME")
    if given:
        ns = given[0]
    elif principal.grant.namespace is not None:
        ns = principal.grant.namespace
    else:
        raise InvalidInput(
            f"this key reaches every namespace under {principal.grant.prefix!r}: name one, "
            f"/mcp?namespace={principal.grant.prefix}NAME"
        )
    check_reach(principal, ns)  # exactly as a REST route checks its path's
    return ns
