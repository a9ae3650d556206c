"""HTTP plumbing shared by the provider adapters: retries, timeouts, error mapping."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from memdir._overflow import is_overflow
from memdir.errors import ConfigError, ContextOverflowError, ModelError

__all__ = ["RetryPolicy", "error_message", "is_overflow", "post_json"]

# Statuses worth another attempt: rate limits, overload and transient server failures.
# (529 is Anthropic's "overloaded".)
_RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 529})

_sleep = asyncio.sleep  # patched by tests to observe back-off without waiting


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
    attempt = 0
    while True:
        try:
            response = await client.post(
                url,
                json=payload,
                headers=dict(headers),
                timeout=httpx.Timeout(timeout, connect=10.0),
            )
        except httpx.TimeoutException as exc:
            failure = ModelError(f"{provider} did not answer within {timeout:g}s ({url})")
            failure.__cause__ = exc
            retry_after = None
        except httpx.RequestError as exc:  # network, protocol, decoding, redirect loops
            failure = ModelError(f"cannot reach {provider} at {url}: {exc or type(exc).__name__}")
            failure.__cause__ = exc
            retry_after = None
        else:
            if response.is_success:
                body = _body(response)
                # Some gateways answer 200 with an error object instead of a result.
                if isinstance(body, dict) and body.get("error") is None:
                    return body
                if is_overflow(response.status_code, body):
                    raise ContextOverflowError(
                        f"{provider}: request exceeds the context window: {error_message(body)}",
                        status_code=response.status_code,
                        body=body,
                    )
                raise ModelError(
                    f"{provider} returned an unusable answer: {error_message(body)}",
                    status_code=response.status_code,
                    body=body,
                )
            body = _body(response)
            status = response.status_code
            if is_overflow(status, body):
                raise ContextOverflowError(
                    f"{provider}: request exceeds the context window: {error_message(body)}",
                    status_code=status,
                    body=body,
                )
            failure = ModelError(
                f"{provider} returned HTTP {status}: {error_message(body)}",
                status_code=status,
                body=body,
            )
            if status not in _RETRY_STATUSES:
                raise failure
            retry_after = _retry_after(response)
        attempt += 1
        if attempt > retry.max_retries:
            if attempt > 1:
                failure.args = (f"{failure.args[0]} (after {attempt} attempts)",)
            raise failure
        await _sleep(retry.delay(attempt, retry_after))
