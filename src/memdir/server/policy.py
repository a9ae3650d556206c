"""The route policy, by construction: a route cannot be added without saying who may call it.

:class:`MemdirRouter` has no way to add a route without a :class:`Policy`; it puts
:func:`require_principal` first among the route's dependencies, which authenticates the key
and checks its scope before anything else runs, and is the only place a :class:`Principal`
comes from. A handler reaches a namespace only through :func:`bound_namespace`, which checks
the name (422) and then the key's grant (404, the same answer as a namespace that does not
exist) before the store is touched; the namespace is only ever the path's, never a body field
or a query parameter that could widen it. ``tests/test_server_route_policy.py`` walks every
route and fails if one escapes these rules.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Annotated, Any, Final, TypeVar

import anyio.to_thread
from fastapi import APIRouter, Depends, Header, Request, Response
from fastapi.routing import APIRoute

from memdir.errors import ConfigError, MemdirError
from memdir.server.auth import (
    AuthError,
    IssuerUnavailable,
    JwtAuthenticator,
    Principal,
    Scope,
    looks_like_jwt,
    parse_key,
)
from memdir.server.guards import SAFE_METHODS, admit, before_write, guarded, idempotent_run
from memdir.server.idempotency import IDEMPOTENCY_HEADER, KEY_PATTERN, LedgerOnce
from memdir.server.problems import (
    InsufficientScope,
    InvalidInput,
    NamespaceNotFound,
    Problem,
    ProblemError,
    Unauthorized,
)
from memdir.server.state import ServerState, server_state
from memdir.store.namespaces import validate_namespace
from memdir.store.workspace import Workspace

__all__ = [
    "AppendOnce",
    "Bound",
    "BoundNamespace",
    "CurrentPrincipal",
    "MemdirRouter",
    "Policy",
    "PolicyRoute",
    "PrincipalGuard",
    "Scope",
    "authenticate",
    "bound_namespace",
    "check_reach",
    "require_principal",
]

logger = logging.getLogger("memdir.server")
_F = TypeVar("_F", bound=Callable[..., Any])


@dataclass(frozen=True, slots=True, kw_only=True)
class Policy:
    """Who may call a route, and how it is served.

    Attributes:
        scope: the key scope it needs; ``None``: public (only the health probes and the
            OpenAPI document).
        body_limit: the largest request body in bytes (``None``: the server's default;
            enforced by :class:`~memdir.server.limits.BodyLimitMiddleware`).
        job: runs as a long job (a per-tenant job slot, off the request threads).
        idempotent: honours an ``Idempotency-Key`` header.
        streamed: the route reads its body as a stream (an archive), so it is never held in
            memory whole: the quota counts its ``Content-Length``, and it takes no
            ``Idempotency-Key``, because the write is safe to repeat as it is (an import skips
            the files it already holds).
    """

    scope: Scope | None
    body_limit: int | None = None
    job: bool = False
    idempotent: bool = False
    streamed: bool = False


class PrincipalGuard:
    """The dependency that authenticates a request and checks its key's scope."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy

    async def __call__(self, request: Request) -> Principal | None:
        needed = self.policy.scope
        if needed is None:
            return None
        checked = getattr(request.state, "principal", None)
        if isinstance(checked, Principal):  # by PolicyRoute, before the body was read
            return checked
        state = server_state(request)
        token = _bearer(request)
        try:
            principal = await _authenticate(state, token)
        except AuthError as exc:
            state.metrics.auth_failures.labels(exc.reason).inc()
            raise Unauthorized(str(exc), missing=exc.reason == "missing") from None
        if principal.scope < needed:
            state.metrics.auth_failures.labels("scope").inc()
            raise InsufficientScope(needed.label, principal.scope.label)
        request.state.principal = principal
        admit(state, request, principal)
        return principal


async def _authenticate(state: ServerState, token: str | None) -> Principal:
    """A cached key is checked on the event loop; an unknown one is looked up in a thread.
    A bearer that is not a memdir key is a JWT when the server takes them (``--jwks-url``)."""
    auth = state.authenticator
    parsed = parse_key(token) if token else None
    if parsed is None:
        if token and state.jwt is not None and looks_like_jwt(token):
            return await _authenticate_jwt(state.jwt, token)
        return auth.verify(token, None)
    known, record = auth.cached(parsed[0])
    if not known:
        try:
            record = await anyio.to_thread.run_sync(auth.lookup, parsed[0])
        except MemdirError as exc:  # the caller learns nothing of the key store's trouble
            logger.warning("cannot read the keys (%s): %s", type(exc).__name__, exc)
            detail = "the keys cannot be read; try again soon"
            raise ProblemError(
                503, "keys-unavailable", detail, headers={"Retry-After": "5"}
            ) from None
    return auth.verify(token, record)


async def _authenticate_jwt(jwt: JwtAuthenticator, token: str) -> Principal:
    """A JWT checked in a thread (its issuer's keys may have to be fetched)."""
    try:
        return await anyio.to_thread.run_sync(jwt.authenticate, token)
    except IssuerUnavailable as exc:
        logger.warning("cannot fetch the JWT issuer's keys: %s", exc)
        raise ProblemError(
            503,
            "keys-unavailable",
            "the identity provider's keys cannot be fetched; try again soon",
            headers={"Retry-After": "5"},
        ) from None


async def authenticate(state: ServerState, token: str | None) -> Principal:
    """The principal of a bearer ``token``, checked as every route checks it (for ``/mcp``,
    whose requests are not routes of their own).

    Raises:
        AuthError: no key, or one that is not valid, revoked or expired.
        ProblemError: 503, the keys cannot be read.
    """
    return await _authenticate(state, token)


def _bearer(request: Request) -> str | None:
    header = request.headers.get("authorization")
    if header is None:
        return None
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return ""  # present but not a bearer key: invalid, not missing
    return value.strip()


def require_principal(policy: Policy) -> PrincipalGuard:
    """The authentication dependency of a route with ``policy``."""
    return PrincipalGuard(policy)


def _principal_of(request: Request) -> Principal:
    """The principal :class:`PrincipalGuard` authenticated (fails closed without one)."""
    principal = getattr(request.state, "principal", None)
    if not isinstance(principal, Principal):
        raise RuntimeError("a route asked for the principal without a policy that sets it")
    return principal


async def current_principal(request: Request) -> Principal:
    """The principal :class:`PrincipalGuard` authenticated (fails closed without one).

    A coroutine, as are the other dependencies that do not block: FastAPI runs a plain
    function in a worker thread, and each trip there and back costs more than the check.
    """
    return _principal_of(request)


CurrentPrincipal = Annotated[Principal, Depends(current_principal)]
"""A handler parameter: the authenticated caller."""


@dataclass(frozen=True, slots=True)
class Bound:
    """A namespace the caller may reach, opened.

    Attributes:
        principal: the caller.
        ns: the namespace's name.
        ws: the namespace's workspace: the only way a handler reaches the store.
    """

    principal: Principal
    ns: str
    ws: Workspace


def check_reach(principal: Principal, ns: str) -> None:
    """Refuse ``ns`` unless it is a valid name the key reaches; the store is not touched.

    Raises:
        InvalidInput: 422, a name that can never exist.
        NamespaceNotFound: 404, a name out of the key's reach (the answer for a namespace
            that does not exist).
    """
    try:
        validate_namespace(ns)
    except ConfigError as exc:
        raise InvalidInput(str(exc)) from None
    if not principal.grant.allows(ns):
        raise NamespaceNotFound(ns)


async def bound_namespace(request: Request, ns: str) -> Bound:
    """The namespace of the path, checked against the key before the store is touched.

    A name that can never exist is a 422; a name outside the key's grant is the same 404 as
    a namespace that does not exist. A write creates the namespace (within the quota); a read
    or a delete of a missing one is a 404. A namespace this process has opened before is
    found without the store; only a look at the store goes to a worker thread.
    """
    principal = _principal_of(request)
    check_reach(principal, ns)
    state = server_state(request)
    ws = state.pool.opened(ns)
    if ws is None:
        ws = await anyio.to_thread.run_sync(_open_namespace, state, principal, ns, request)
    return Bound(principal, ns, ws)


def _open_namespace(
    state: ServerState, principal: Principal, ns: str, request: Request
) -> Workspace:
    """Namespace ``ns`` from the store. A write to a missing one is checked against the
    tenant's quota here and creates it in its gate (:func:`write_gate`), once its idempotency
    key is claimed: a retry refused there (an erased or reused key) creates nothing."""
    ws = state.pool.get(ns, create=False)
    if ws is None and request.method not in {*SAFE_METHODS, "DELETE"}:
        state.usage.check_new_namespace(principal.tenant)
        request.state.new_namespace = True
        return state.pool.unopened(ns)
    if ws is None:
        raise NamespaceNotFound(ns)
    return ws


def _create_namespace(state: ServerState, principal: Principal, ns: str) -> None:
    if state.pool.get(ns, create=False) is not None:  # made meanwhile by another request
        return
    state.usage.check_new_namespace(principal.tenant)
    state.pool.get(ns, create=True)
    state.usage.add(principal.tenant, namespaces=1)


BoundNamespace = Annotated[Bound, Depends(bound_namespace)]
"""A handler parameter: the path's namespace, checked and opened."""


async def append_once(request: Request, bound: BoundNamespace) -> LedgerOnce:
    """The ``before_append`` hook of an add: with an ``Idempotency-Key``, an add retried after
    its server died finds the block it wrote instead of writing it again."""
    return LedgerOnce(bound.ws, idempotent_run(request))


AppendOnce = Annotated[LedgerOnce, Depends(append_once)]
"""A handler parameter: ``add_memory``'s ``before_append`` for this request."""


IdempotencyKey = Annotated[
    str | None,
    Header(
        alias=IDEMPOTENCY_HEADER,
        pattern=KEY_PATTERN,
        description="A key of this write (a UUID): sent again with the same request, the "
        "write is made once and its answer replayed (Idempotency-Replayed: true).",
    ),
]


def write_gate(policy: Policy, *, namespaced: bool) -> Callable[..., Coroutine[Any, Any, None]]:
    """The dependency of a write route after its namespace is checked: the idempotency
    claim and the quota (:func:`memdir.server.guards.before_write`)."""

    async def gate(request: Request, **params: Any) -> None:
        principal = params["bound"].principal if namespaced else params["principal"]
        key = params.get("idempotency_key")
        into = params["bound"].ns if namespaced else ""
        await before_write(
            request,
            principal,
            key,
            idempotent=policy.idempotent,
            streamed=policy.streamed,
            namespace=into,
        )
        if namespaced and getattr(request.state, "new_namespace", False):
            bound = params["bound"]
            state = server_state(request)
            await anyio.to_thread.run_sync(_create_namespace, state, principal, bound.ns)

    named = inspect.Parameter.KEYWORD_ONLY
    parameters = [
        inspect.Parameter("request", named, annotation=Request),
        inspect.Parameter("bound", named, annotation=BoundNamespace)
        if namespaced
        else inspect.Parameter("principal", named, annotation=CurrentPrincipal),
    ]
    if policy.idempotent:
        parameters.append(
            inspect.Parameter("idempotency_key", named, default=None, annotation=IdempotencyKey)
        )
    gate.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    return gate


class PolicyRoute(APIRoute):
    """A route that carries its :class:`Policy` (taken from its :class:`PrincipalGuard`),
    its handler wrapped by :func:`memdir.server.guards.guarded`; the guard runs before the
    request's body is read."""

    policy: Policy

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        super().__init__(path, endpoint, **kwargs)
        self.policy = self._guard().policy

    def _guard(self) -> PrincipalGuard:
        guards = [
            d.dependency for d in self.dependencies if isinstance(d.dependency, PrincipalGuard)
        ]
        if len(guards) != 1:
            raise TypeError(
                f"route {self.path} must have exactly one policy (MemdirRouter adds it)"
            )
        assert isinstance(guards[0], PrincipalGuard)
        return guards[0]

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        guard = self._guard()

        async def key_first(request: Request) -> Response:
            # FastAPI reads and parses a JSON body before it runs any dependency: the key is
            # checked here first, so a caller without one is refused before its body is read.
            await guard(request)
            return await handler(request)

        return guarded(key_first)


_PROBLEMS: Final = {
    401: "No key, or a key that is not valid.",
    403: "The key's scope does not allow this.",
    404: "Not found (a namespace the key does not reach is not found either).",
    409: "A request with this Idempotency-Key is still running (Retry-After).",
    410: "The result of the request sent with this Idempotency-Key was erased (a forget or "
    "a namespace delete); it is not run again.",
    413: "The request body is too large.",
    422: "The request is not valid (or its Idempotency-Key was used for another request).",
    429: "The tenant sends too many requests, or has too many in flight (Retry-After).",
    503: "The store or the keys cannot be read; try again (Retry-After).",
    507: "The write would take the tenant past its storage quota (limit and used named).",
}


def _served(endpoint: Callable[..., Any]) -> Callable[..., Any]:
    """``endpoint`` as a coroutine; a plain function runs in a worker thread.

    FastAPI runs a plain function in a worker thread itself, but then validates its answer in
    another trip to a thread; run here, the blocking work makes one trip and the (quick)
    validation stays on the event loop. The signature, name and annotations are the
    function's (``functools.wraps``), so the parameters and the OpenAPI document are the same.
    """
    if inspect.iscoroutinefunction(endpoint):
        return endpoint

    @functools.wraps(endpoint)
    async def in_thread(*args: Any, **kwargs: Any) -> Any:
        return await anyio.to_thread.run_sync(functools.partial(endpoint, *args, **kwargs))

    return in_thread


def _operation_id(route: APIRoute) -> str:
    """A route's OpenAPI operation id: its name (``search``, ``put_memory_md``), which stays
    the same when its path or module changes."""
    return route.name


class MemdirRouter:
    """Routes that each carry a :class:`Policy`; there is no way to add one without.

    Args:
        prefix: the path every route of this router starts with.
    """

    def __init__(self, prefix: str = "") -> None:
        self._router = APIRouter(
            prefix=prefix, route_class=PolicyRoute, generate_unique_id_function=_operation_id
        )

    @property
    def routes(self) -> list[Any]:
        """The routes added so far (:class:`PolicyRoute` objects)."""
        return list(self._router.routes)

    def add(
        self, method: str, path: str, endpoint: Callable[..., Any], *, policy: Policy, **kwargs: Any
    ) -> None:
        """Add ``endpoint`` at ``method path`` with ``policy``."""
        statuses = [401, 403, 422, 429, 503] if policy.scope is not None else []
        if "{ns}" in self._router.prefix + path:
            statuses.append(404)
        dependencies = [Depends(require_principal(policy))]
        if method not in SAFE_METHODS:
            statuses += [413, 507]
            namespaced = "{ns}" in self._router.prefix + path
            dependencies.append(Depends(write_gate(policy, namespaced=namespaced)))
        if policy.idempotent:
            statuses += [409, 410]
        responses: dict[int | str, dict[str, Any]] = {
            status: {"model": Problem, "description": _PROBLEMS[status]}
            for status in sorted(statuses)
        }
        responses.update(kwargs.pop("responses", {}))
        self._router.add_api_route(
            path,
            _served(endpoint),
            methods=[method],
            dependencies=dependencies,
            responses=responses,
            name=kwargs.pop("name", endpoint.__name__),
            **kwargs,
        )

    def _method(
        self, method: str, path: str, policy: Policy, kwargs: dict[str, Any]
    ) -> Callable[[_F], _F]:
        def register(endpoint: _F) -> _F:
            self.add(method, path, endpoint, policy=policy, **kwargs)
            return endpoint

        return register

    def get(self, path: str, *, policy: Policy, **kwargs: Any) -> Callable[[_F], _F]:
        """Decorator: a ``GET`` route with ``policy``."""
        return self._method("GET", path, policy, kwargs)

    def post(self, path: str, *, policy: Policy, **kwargs: Any) -> Callable[[_F], _F]:
        """Decorator: a ``POST`` route with ``policy``."""
        return self._method("POST", path, policy, kwargs)

    def put(self, path: str, *, policy: Policy, **kwargs: Any) -> Callable[[_F], _F]:
        """Decorator: a ``PUT`` route with ``policy``."""
        return self._method("PUT", path, policy, kwargs)

    def delete(self, path: str, *, policy: Policy, **kwargs: Any) -> Callable[[_F], _F]:
        """Decorator: a ``DELETE`` route with ``policy``."""
        return self._method("DELETE", path, policy, kwargs)
