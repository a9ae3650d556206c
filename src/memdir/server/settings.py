"""How ``memdir serve`` runs: :class:`ServerSettings`, each field an option of the command.

The settings travel to worker processes as JSON in ``$MEMDIR_SERVE_CONFIG`` (they hold no
secret: a PostgreSQL password in the workspace URL is the store's own credential, which every
worker needs anyway, and the variable is only in the server's own environment).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

from memdir._net import is_loopback_host
from memdir.errors import ConfigError

if TYPE_CHECKING:
    from memdir.memory import MaintenanceConfig

__all__ = ["CONFIG_ENV", "IMPORT_LIMIT_MAX", "METRICS_TOKEN_ENV", "ServerSettings"]

CONFIG_ENV: Final = "MEMDIR_SERVE_CONFIG"
"""The variable a worker process reads its settings from."""
IMPORT_LIMIT_MAX: Final = 1 << 40
"""The largest ``import_limit`` there may be (1 TiB)."""
METRICS_TOKEN_ENV: Final = "MEMDIR_METRICS_TOKEN"
"""The variable holding the token of ``/metrics`` (else ``metrics_token_file``)."""
_MIN_TOKEN: Final = 16


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerSettings:
    """The settings of one server.

    Attributes:
        workspace: the workspace: a directory or a ``postgresql://`` URL.
        host: the interface to listen on (default loopback only).
        port: the TCP port (``0``: any free port; the one bound is printed).
        workers: worker processes sharing the socket.
        graceful_timeout: seconds in-flight requests get to finish on SIGTERM.
        body_limit: the largest request body, in bytes, of a route that sets none.
        key_poll_seconds: how often a process looks for added or revoked keys, and how long
            it trusts that a namespace it found still exists (one deleted through another
            replica is found missing at most that long after).
        log_namespaces: write namespace names in the access log (default: a hash of them).
        ssl_certfile: a PEM certificate chain: serve HTTPS (else plain HTTP, behind a proxy).
        ssl_keyfile: the PEM private key of ``ssl_certfile``.
        model: the model of flushes, compactions and consolidations: ``extractive``
            (offline, the default), ``provider:model`` (:func:`memdir.models.model_from_string`)
            or ``python:MODULE:FUNCTION`` (a function returning a model).
        max_memory_tokens: the ``MEMORY.md`` budget of consolidations, in tokens.
        job_timeout: seconds a job (flush, compaction, consolidation, maintenance run) may run.
        job_threads: jobs running at once in one process (each tenant runs one at a time).
        import_limit: the largest archive an import takes, in bytes, sent and unpacked.
        import_max_files: the most files an imported archive may hold.
        maintenance: maintain the tenants' namespaces in the background (see
            :mod:`memdir.server.maintenance`); off when a cron job runs ``memdir maintain``.
        sweep_interval: seconds between two passes over every namespace.
        sweep_lease: seconds the sweep lease lasts without renewal: how soon another replica
            takes over the passes when the sweeping one dies.
        maintenance_interval: seconds between two full maintenance runs of a namespace.
        consolidation_gap: the least seconds between two consolidations a flush asked for.
        retention_days: ledgers older than this many days move to ``memory/archive/``.
        session_retention_days: session logs older than this many days are deleted.
        jwks_url: take bearer JWTs signed by the keys published here (``https://``; ``None``:
            memdir keys only); needs ``jwt_issuer`` and ``jwt_audience``.
        jwt_issuer: the ``iss`` a JWT must have.
        jwt_audience: the ``aud`` a JWT must have.
        jwt_tenant_claim: the claim of a JWT naming its tenant.
        jwt_namespace_claim: the claim of a JWT naming the one namespace it reaches (optional
            in a token).
        idempotency_ttl: seconds the answer of a write with an ``Idempotency-Key`` is kept.
        idempotency_lease: seconds a write's claim of its key holds without being renewed
            (it is renewed while the write runs): how soon a retry may take over from a
            server that died.
        rate: requests a second each tenant may send to this process (``0``: no limit).
        burst: requests a tenant may send at once above its rate.
        inflight_per_tenant: requests of one tenant this process serves at once (``0``: no
            limit); more are refused (429), so one tenant cannot hold every worker thread.
        quota_bytes: bytes a tenant's namespaces may hold (``0``: no quota).
        quota_namespaces: namespaces a tenant may have (``0``: no quota).
        quota_refresh: seconds a measure of a tenant's storage is used before the store is
            measured again (writes are added in between).
        metrics: count requests for Prometheus (``/metrics``).
        metrics_token_file: a file holding the bearer token ``/metrics`` needs (the token
            itself is never a setting: it is read from here or ``$MEMDIR_METRICS_TOKEN``);
            without either, ``/metrics`` answers loopback clients only.
        ui: serve the web UI under ``/ui`` (logging in takes an API key).
        ui_local: the UI of ``memdir ui``: one person on loopback, no key, the workspace
            itself and every namespace in it (the host must be a loopback address).
    """

    workspace: str
    host: str = "127.0.0.1"
    port: int = 8000
    workers: int = 1
    graceful_timeout: float = 30.0
    body_limit: int = 1 << 20
    key_poll_seconds: float = 1.0
    log_namespaces: bool = False
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    model: str = "extractive"
    max_memory_tokens: int = 4000
    job_timeout: float = 300.0
    job_threads: int = 4
    import_limit: int = 256 << 20
    import_max_files: int = 10_000
    maintenance: bool = True
    sweep_interval: float = 60.0
    sweep_lease: float = 120.0
    maintenance_interval: float = 6 * 3600.0
    consolidation_gap: float = 30 * 60.0
    retention_days: int = 90
    session_retention_days: int = 180
    jwks_url: str | None = None
    jwt_issuer: str | None = None
    jwt_audience: str | None = None
    jwt_tenant_claim: str = "memdir_tenant"
    jwt_namespace_claim: str = "memdir_namespace"
    idempotency_ttl: float = 86_400.0
    idempotency_lease: float = 30.0
    rate: float = 100.0
    burst: int = 200
    inflight_per_tenant: int = 16
    quota_bytes: int = 1 << 30
    quota_namespaces: int = 1000
    quota_refresh: float = 60.0
    metrics: bool = True
    metrics_token_file: str | None = None
    ui: bool = True
    ui_local: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.workspace, str) or not self.workspace.strip():
            raise ConfigError("memdir serve needs a workspace: -w DIR or -w postgresql://...")
        if not self.host.strip():
            raise ConfigError("--host must name an interface, e.g. 127.0.0.1 or 0.0.0.0")
        if not 0 <= self.port <= 65_535:
            raise ConfigError(f"--port must be 0 to 65535, not {self.port}")
        if not 1 <= self.workers <= 256:
            raise ConfigError(f"--workers must be 1 to 256, not {self.workers}")
        for name in (
            "graceful_timeout",
            "key_poll_seconds",
            "job_timeout",
            "sweep_interval",
            "sweep_lease",
            "maintenance_interval",
            "idempotency_ttl",
            "idempotency_lease",
            "quota_refresh",
        ):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ConfigError(f"{name} must be a positive number of seconds, not {value}")
        if not (math.isfinite(self.rate) and self.rate >= 0):
            raise ConfigError(f"--rate must be a number of requests a second >= 0, not {self.rate}")
        if self.burst < 1:
            raise ConfigError(f"--burst must be at least 1, not {self.burst}")
        for name in ("inflight_per_tenant", "quota_bytes", "quota_namespaces"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be 0 (no limit) or more, not {getattr(self, name)}")
        if self.body_limit < 1:
            raise ConfigError(
                f"body_limit must be a positive number of bytes, not {self.body_limit}"
            )
        if not isinstance(self.model, str) or not self.model.strip():
            raise ConfigError("--model must name a model, e.g. extractive or openai:gpt-4o-mini")
        if self.max_memory_tokens < 50:
            raise ConfigError(
                f"--max-memory-tokens must be at least 50, not {self.max_memory_tokens}"
            )
        if not 1 <= self.job_threads <= 256:
            raise ConfigError(f"--job-threads must be 1 to 256, not {self.job_threads}")
        if not 1 <= self.import_limit <= IMPORT_LIMIT_MAX:
            raise ConfigError(
                f"--import-limit must be 1 to {IMPORT_LIMIT_MAX:,} bytes, not {self.import_limit}"
            )
        if self.import_max_files < 1:
            raise ConfigError(f"--import-max-files must be positive, not {self.import_max_files}")
        if not (math.isfinite(self.consolidation_gap) and self.consolidation_gap >= 0):
            raise ConfigError(
                f"--consolidation-gap must be 0 or more seconds, not {self.consolidation_gap}"
            )
        for name in ("retention_days", "session_retention_days"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1 day, not {getattr(self, name)}")
        if (self.ssl_certfile is None) != (self.ssl_keyfile is None):
            raise ConfigError("--ssl-certfile and --ssl-keyfile go together")
        if self.ui_local and not is_loopback_host(self.host):
            raise ConfigError(
                f"memdir ui serves one person without a key, so it listens on loopback only, "
                f"not {self.host}: run memdir serve (a key per tenant) to share memory"
            )
        self._check_jwt()

    def _check_jwt(self) -> None:
        given = [self.jwks_url, self.jwt_issuer, self.jwt_audience]
        if all(value is None for value in given):
            return
        if any(not value for value in given):
            raise ConfigError(
                "JWTs need --jwks-url, --jwt-issuer and --jwt-audience together (a token of "
                "the issuer for another audience must not reach this server)"
            )
        assert self.jwks_url is not None
        url = urlsplit(self.jwks_url)
        if url.scheme != "https" and not (
            url.scheme == "http" and is_loopback_host(url.hostname or "")
        ):
            raise ConfigError(
                f"--jwks-url must be https:// (http:// only on loopback), not {self.jwks_url!r}: "
                "whoever can change the keys on the way could sign tokens of any tenant"
            )
        for name in ("jwt_tenant_claim", "jwt_namespace_claim"):
            if not getattr(self, name).strip():
                raise ConfigError(f"--{name.replace('_', '-')} must name a claim")

    def metrics_token(self) -> str | None:
        """The token ``/metrics`` needs: ``$MEMDIR_METRICS_TOKEN``, else the first line of
        ``metrics_token_file``; ``None`` without either.

        Raises:
            ConfigError: the file cannot be read, or the token is shorter than 16 characters.
        """
        token = os.environ.get(METRICS_TOKEN_ENV)
        where = f"${METRICS_TOKEN_ENV}"
        if not token and self.metrics_token_file is not None:
            where = self.metrics_token_file
            try:
                with open(self.metrics_token_file, encoding="utf-8") as fh:
                    token = fh.readline()
            except (OSError, UnicodeDecodeError) as exc:
                raise ConfigError(f"cannot read the metrics token from {where}: {exc}") from None
        if not token:
            return None
        token = token.strip()
        if len(token) < _MIN_TOKEN or not token.isprintable() or " " in token:
            raise ConfigError(
                f"the metrics token in {where} must be {_MIN_TOKEN} or more printable "
                "characters without spaces (e.g. the output of: openssl rand -hex 32)"
            )
        return token

    @property
    def scheme(self) -> str:
        """``https`` with a certificate, else ``http``."""
        return "https" if self.ssl_certfile else "http"

    @property
    def maintenance_config(self) -> MaintenanceConfig:
        """The maintenance of a namespace, as these settings define it."""
        from memdir.memory import MaintenanceConfig

        return MaintenanceConfig(
            interval=timedelta(seconds=self.maintenance_interval),
            consolidation_min_gap=timedelta(seconds=self.consolidation_gap),
            daily_file_retention_days=self.retention_days,
            session_retention_days=self.session_retention_days,
            max_memory_tokens=self.max_memory_tokens,
            # the vectors of a run stop in time for the rest of the job to end within its timeout
            embed_time_budget=timedelta(seconds=min(300.0, self.job_timeout / 2)),
        )

    def to_env(self) -> str:
        """The settings as the JSON of ``$MEMDIR_SERVE_CONFIG``."""
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> ServerSettings:
        """The settings :meth:`to_env` wrote into the environment.

        Raises:
            ConfigError: the variable is missing or not valid settings.
        """
        raw = (environ if environ is not None else dict(os.environ)).get(CONFIG_ENV)
        if not raw:
            raise ConfigError(f"${CONFIG_ENV} is not set: start the server with memdir serve")
        try:
            data: Any = json.loads(raw)
            return cls(**data)
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"${CONFIG_ENV} does not hold server settings: {exc}") from None
