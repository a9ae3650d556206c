"""What a client is set up with: the server's URL, the key, timeouts and retries, checked once.

The key comes from ``api_key=``, else ``$MEMDIR_API_KEY``, else the file named by
``$MEMDIR_API_KEY_FILE``. A key is a bearer secret, so it is never sent in clear across a
network: ``http://`` is refused for any host but loopback unless
``MEMDIR_ALLOW_INSECURE_HTTP=1``. The key is kept out of ``repr``, logs and every message.
"""

from __future__ import annotations

import ipaddress
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import httpx

from memdir.errors import ConfigError

__all__ = ["ClientConfig", "RetryPolicy", "check_url", "find_key"]

API_KEY_ENV: Final = "MEMDIR_API_KEY"
API_KEY_FILE_ENV: Final = "MEMDIR_API_KEY_FILE"
INSECURE_ENV: Final = "MEMDIR_ALLOW_INSECURE_HTTP"
_MAX_KEY_CHARS: Final = 4_096  # a JWT bearer may be long; a key is 64 characters


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """How failed attempts are retried.

    Attributes:
        retries: attempts after the first (0: none).
        backoff: the first back-off in seconds; it doubles with each attempt (up to
            ``max_backoff``), and a random part of it is taken off (jitter).
        max_backoff: the longest back-off between two attempts.
        max_wait: the longest ``Retry-After`` waited for; a server asking for longer gets
            its error raised at once (``RateLimited.retry_after`` says how long).
    """

    retries: int = 4
    backoff: float = 0.5
    max_backoff: float = 8.0
    max_wait: float = 30.0


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientConfig:
    """A client's settings (see :meth:`resolve`)."""

    base_url: str
    api_key: str = field(repr=False)
    timeout: float
    job_timeout: float
    retry: RetryPolicy

    @classmethod
    def resolve(
        cls,
        url: str,
        api_key: str | None,
        *,
        timeout: float,
        job_timeout: float,
        retries: int,
        backoff: float,
        max_wait: float,
    ) -> ClientConfig:
        """Check the settings and find the key.

        Raises:
            ConfigError: a bad URL, an ``http://`` URL to another host, no key, or a bad
                number; the message never holds the key.
        """
        for name, value in (
            ("timeout", timeout),
            ("job_timeout", job_timeout),
            ("backoff", backoff),
            ("max_wait", max_wait),
        ):
            _check_seconds(name, value, allow_zero=name in ("backoff", "max_wait"))
        if isinstance(retries, bool) or not isinstance(retries, int) or not 0 <= retries <= 100:
            raise ConfigError(f"retries must be a whole number from 0 to 100, not {retries!r}")
        return cls(
            base_url=check_url(url),
            api_key=find_key(api_key),
            timeout=float(timeout),
            job_timeout=float(job_timeout),
            retry=RetryPolicy(retries=retries, backoff=float(backoff), max_wait=float(max_wait)),
        )


def _check_seconds(name: str, value: object, *, allow_zero: bool) -> None:
    ok = (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and (value >= 0 if allow_zero else value > 0)
    )
    if not ok:
        least = "0 or more" if allow_zero else "more than 0"
        raise ConfigError(f"{name} must be a number of seconds, {least}, not {value!r}")


def check_url(url: object) -> str:
    """``url`` as the server's base URL, checked (see :meth:`ClientConfig.resolve`)."""
    if not isinstance(url, str) or not url.strip():
        raise ConfigError("the server URL must be text such as 'https://memory.example.com'")
    try:
        parsed = httpx.URL(url.strip())
    except (httpx.InvalidURL, TypeError, ValueError):
        raise ConfigError("the server URL is not a valid URL") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise ConfigError(
            "the server URL must start with https:// (or http:// on loopback), with a host"
        )
    if parsed.userinfo:
        raise ConfigError("the server URL must not hold a user or password: pass api_key=")
    if parsed.query or parsed.fragment:
        raise ConfigError("the server URL must not have a query or a fragment")
    insecure_ok = os.environ.get(INSECURE_ENV) == "1"
    if parsed.scheme == "http" and not _loopback(parsed.host) and not insecure_ok:
        raise ConfigError(
            f"refusing to send an API key in clear to {parsed.host} over http://: use "
            f"https://, or set {INSECURE_ENV}=1 on a network you trust"
        )
    return str(parsed.copy_with(path=parsed.path.rstrip("/") or "/")).rstrip("/")


def _loopback(host: str) -> bool:
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def find_key(api_key: object) -> str:
    """The key: ``api_key``, else ``$MEMDIR_API_KEY``, else ``$MEMDIR_API_KEY_FILE``'s."""
    if api_key is not None:
        if not isinstance(api_key, str):
            raise ConfigError(f"api_key must be text, not {type(api_key).__name__}")
        return _check_key(api_key, "api_key")
    from_env = os.environ.get(API_KEY_ENV)
    if from_env:
        return _check_key(from_env, f"${API_KEY_ENV}")
    key_file = os.environ.get(API_KEY_FILE_ENV)
    if key_file:
        try:
            text = Path(key_file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not text"
            raise ConfigError(
                f"cannot read the key file {key_file} (${API_KEY_FILE_ENV}): {reason}"
            ) from None
        return _check_key(text, f"the key file {key_file}")
    raise ConfigError(
        f"no API key: pass api_key=, or set ${API_KEY_ENV} or ${API_KEY_FILE_ENV} "
        "(memdir keys create makes one)"
    )


def _check_key(raw: str, where: str) -> str:
    key = raw.strip()
    if not key:
        raise ConfigError(f"the API key in {where} is empty")
    if len(key) > _MAX_KEY_CHARS or not all("!" <= ch <= "~" for ch in key):
        # Never quote the key: the message may reach a log.
        raise ConfigError(
            f"the API key in {where} is not a key: it must be one word of printable ASCII "
            f"(at most {_MAX_KEY_CHARS:,} characters)"
        )
    return key
