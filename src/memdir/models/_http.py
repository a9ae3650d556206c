"""HTTP plumbing shared by the provider adapters: retries, timeouts, error mapping."""

from __future__ import annotations

import asyncio
import json
import random
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from memdir.errors import ConfigError, ContextOverflowError, ModelError
from memdir.models._overflow import is_overflow

__all__ = ["RetryPolicy", "error_message", "is_overflow", "post_json", "post_json_sync"]

# Statuses worth another attempt: rate limits, overload and transient server failures.
# (529 is Anthropic's "overloaded".)
_RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 529})

_sleep = asyncio.sleep  # patched by tests to observe back-off without waiting
_sleep_sync = time.sleep


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """How a provider adapter retries rate limits and transient failures.

    Attributes:
        max_retries: extra attempts after the first (0 disables retrying).
        initial_backoff: seconds before the first retry; doubled each time, with jitter.
        max_backoff: upper bound of one wait, also for a server's ``Retry-After``.
    """

    max_retries: int = 3
    initial_backoff: float = 1.0
    max_backoff: float = 30.0

    def __post_init__(self) -> None:
        for name in ("max_retries", "initial_backoff", "max_backoff"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
                raise ConfigError(
                    f"RetryPolicy {name} must be a non-negative number, not {value!r}"
                )
        if not isinstance(self.max_retries, int):
            raise ConfigError(f"RetryPolicy max_retries must be an int, not {self.max_retries!r}")

    def delay(self, attempt: int, retry_after: float | None) -> float:
        """Seconds to wait before retry number ``attempt`` (1-based)."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_backoff)
        base = self.initial_backoff * 2.0 ** (attempt - 1)
        return min(base * (0.5 + random.random() / 2), self.max_backoff)


def error_message(body: object) -> str:
    """The human message inside a provider's error body (best effort, one line)."""
    text: object = body
    if isinstance(body, Mapping):
        err = body.get("error", body)
        if isinstance(err, Mapping):
            text = err.get("message") or err.get("msg") or err.get("type") or err
        elif err is not None:
            text = err
        if text is body and "message" in body:
            text = body["message"]
        if text is body and "detail" in body:
            text = body["detail"]
    if not isinstance(text, str):
        text = json.dumps(text, ensure_ascii=False, default=str)
    text = " ".join(text.split())
    return text if len(text) <= 300 else text[:297] + "..."


_REJECTED = re.compile(r"validation errors?\b|field required|input should be", re.IGNORECASE)


def _rejected(body: object) -> bool:
    """Whether an error body says the request itself is invalid (some servers send 500 for
    it, e.g. llama-cpp-python's pydantic errors): the same request would fail again."""
    return bool(_REJECTED.search(error_message(body)))


def _retry_after(response: httpx.Response) -> float | None:
    # OpenAI also sends "retry-after-ms"; both are optional hints.
    for header, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = response.headers.get(header)
        if value is not None:
            try:
                return float(value) * scale
            except ValueError:
                continue
    return None


def _body(response: httpx.Response) -> object:
    try:
        return response.json()
    except ValueError:
        return response.text


class _Exchange:
    """The retry logic of one request, apart from how it is sent (sync or async).

    :meth:`outcome` takes what one attempt produced and returns the JSON body, or the seconds
    to wait before the next attempt; it raises when the request has failed for good.
    """

    def __init__(self, url: str, *, provider: str, retry: RetryPolicy, timeout: float) -> None:
        self.url = url
        self.provider = provider
        self.retry = retry
        self.timeout = timeout
        self.attempt = 0

    def outcome(
        self, response: httpx.Response | None, error: httpx.RequestError | None = None
    ) -> dict[str, Any] | float:
        provider = self.provider
        retry_after: float | None = None
        if isinstance(error, httpx.TimeoutException):
            failure = ModelError(f"{provider} did not answer within {self.timeout:g}s ({self.url})")
            failure.__cause__ = error
        elif error is not None or response is None:  # network, protocol, decoding, redirects
            failure = ModelError(
                f"cannot reach {provider} at {self.url}: {error or type(error).__name__}"
            )
            failure.__cause__ = error
        else:
            body = _body(response)
            status = response.status_code
            # Some gateways answer 200 with an error object instead of a result.
            if response.is_success and isinstance(body, dict) and body.get("error") is None:
                return body
            if is_overflow(status, body):
                raise ContextOverflowError(
                    f"{provider}: request exceeds the context window: {error_message(body)}",
                    status_code=status,
                    body=body,
                )
            what = "an unusable answer" if response.is_success else f"HTTP {status}"
            failure = ModelError(
                f"{provider} returned {what}: {error_message(body)}", status_code=status, body=body
            )
            if response.is_success or status not in _RETRY_STATUSES or _rejected(body):
                raise failure
            retry_after = _retry_after(response)
        self.attempt += 1
        if self.attempt > self.retry.max_retries:
            if self.attempt > 1:
                failure.args = (f"{failure.args[0]} (after {self.attempt} attempts)",)
            raise failure
        return self.retry.delay(self.attempt, retry_after)


async def post_json(
    client: httpx.AsyncClient | None,
    url: str,
    payload: Mapping[str, Any],
    *,
    headers: Mapping[str, str],
    provider: str,
    retry: RetryPolicy,
    timeout: float,
) -> dict[str, Any]:
    """POST ``payload`` and return the JSON answer, retrying transient failures.

    Raises:
        ContextOverflowError: the provider said the request was too long.
        ModelError: any other failure, after the retries are spent.
    """
    if client is None:
        # No shared client: one per request, so nothing is tied to a finished event loop.
        async with httpx.AsyncClient(timeout=httpx.Timeout(timeout, connect=10.0)) as own:
            return await post_json(
                own, url, payload, headers=headers, provider=provider, retry=retry, timeout=timeout
            )
    exchange = _Exchange(url, provider=provider, retry=retry, timeout=timeout)
    limits = httpx.Timeout(timeout, connect=10.0)
    while True:
        try:
            response = await client.post(url, json=payload, headers=dict(headers), timeout=limits)
        except httpx.RequestError as exc:
            outcome = exchange.outcome(None, exc)
        else:
            outcome = exchange.outcome(response)
        if isinstance(outcome, dict):
            return outcome
        await _sleep(outcome)


def post_json_sync(
    client: httpx.Client,
    url: str,
    payload: Mapping[str, Any],
    *,
    headers: Mapping[str, str],
    provider: str,
    retry: RetryPolicy,
    timeout: float,
) -> dict[str, Any]:
    """Blocking :func:`post_json` on a caller's client (same retries and errors)."""
    exchange = _Exchange(url, provider=provider, retry=retry, timeout=timeout)
    limits = httpx.Timeout(timeout, connect=10.0)
    while True:
        try:
            outcome = exchange.outcome(
                client.post(url, json=payload, headers=dict(headers), timeout=limits)
            )
        except httpx.RequestError as exc:
            outcome = exchange.outcome(None, exc)
        if isinstance(outcome, dict):
            return outcome
        _sleep_sync(outcome)
