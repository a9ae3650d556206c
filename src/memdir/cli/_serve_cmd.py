"""``memdir serve``: the REST API over HTTP, with a key per tenant (see docs/server.md)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from datetime import timedelta
from functools import partial
from pathlib import Path

import click

from memdir._net import is_loopback_host
from memdir.cli._common import (
    EXIT_HELP,
    CliState,
    ParsedType,
    info,
    own_workspace_option,
    pass_state,
)
from memdir.cli._ingest_cmd import model_option
from memdir.cli._maintain_cmds import parse_duration, retention_options
from memdir.errors import ConfigError
from memdir.server.settings import IMPORT_LIMIT_MAX

__all__ = ["serve_cmd"]

_INSTALL = "memdir serve needs the server extra: pip install 'memdir[server]'"


def _seconds(text: str, *, allow_zero: bool = False) -> float:
    """A duration option: seconds (``90``, ``0.5``) or a duration (``90s``, ``30m``, ``6h``)."""
    try:
        seconds = float(text)
    except ValueError:
        return parse_duration(text, allow_zero=allow_zero).total_seconds()
    if not math.isfinite(seconds) or seconds < 0 or (seconds == 0 and not allow_zero):
        raise ConfigError(f"the duration {text!r} must be positive")
    return seconds


def _duration(*, allow_zero: bool = False) -> ParsedType:
    parse: Callable[[str], float] = partial(_seconds, allow_zero=allow_zero)
    return ParsedType("duration", parse)


_SIZE = re.compile(r"(\d+)\s*([kmgt]i?b|b)?", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
_UNITS.update({"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40})


def parse_size(text: str) -> int:
    """``"64KiB"``, ``"500MB"``, ``"2GiB"``, ``"1024"`` → bytes."""
    found = _SIZE.fullmatch(text.strip())
    if found is None:
        raise ConfigError(f"cannot read the size {text!r}: write e.g. 64KiB, 500MB or 2GiB")
    return int(found[1]) * _UNITS[(found[2] or "").lower()]


@click.command("serve", epilog=EXIT_HELP)
@own_workspace_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to listen on.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8000,
    show_default=True,
    help="TCP port; 0 takes any free port (the URL is printed when the server is ready).",
)
@click.option(
    "--workers", type=click.IntRange(1, 256), default=1, show_default=True, help="Processes."
)
@click.option(
    "--graceful-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=30.0,
    show_default=True,
    help="Seconds requests in flight get to finish on SIGTERM.",
)
@click.option(
    "--log-namespaces",
    is_flag=True,
    help="Write namespace names in the access log (default: a hash of each).",
)
@click.option(
    "--ssl-certfile",
    type=click.Path(exists=True, dir_okay=False),
    help="Serve HTTPS with this PEM certificate chain (or put a TLS proxy in front).",
)
@click.option(
    "--ssl-keyfile", type=click.Path(exists=True, dir_okay=False), help="Its PEM private key."
)
@model_option(
    "extractive",
    help="Model of flushes, compactions and consolidations: extractive (offline), "
    "provider:model such as openai:gpt-4o-mini, or python:MODULE:FUNCTION [env MEMDIR_MODEL].",
)
@click.option(
    "--max-memory-tokens",
    type=click.IntRange(min=50),
    default=4000,
    show_default=True,
    help="MEMORY.md budget of consolidations, in tokens.",
)
@click.option(
    "--job-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=300.0,
    show_default=True,
    help="Seconds a flush, compaction, consolidation or maintenance run may take.",
)
@click.option(
    "--job-threads",
    type=click.IntRange(1, 256),
    default=4,
    show_default=True,
    help="Jobs running at once per process (each tenant runs one at a time).",
)
@click.option(
    "--import-limit",
    type=click.IntRange(1, IMPORT_LIMIT_MAX),
    default=256 << 20,
    show_default=True,
    help="The largest archive an import takes, in bytes (sent, and unpacked).",
)
@click.option(
    "--import-max-files",
    type=click.IntRange(min=1),
    default=10_000,
    show_default=True,
    help="The most files an imported archive may hold.",
)
@click.option(
    "--no-maintenance",
    is_flag=True,
    help="Do not maintain the namespaces in the background (run memdir maintain "
    "--all-namespaces from cron instead).",
)
@click.option(
    "--sweep-interval",
    type=_duration(),
    default="60",
    show_default=True,
    help="Time between two passes of the background maintenance over every namespace "
    "(seconds, or 30s, 5m...).",
)
@click.option(
    "--sweep-lease",
    type=_duration(),
    default="120",
    show_default=True,
    help="How long the sweep lease lasts unrenewed: another replica takes the passes over "
    "that long after the sweeping one died on another host.",
)
@click.option(
    "--maintenance-interval",
    type=_duration(),
    default="6h",
    show_default=True,
    help="Time between two full maintenance runs of a namespace.",
)
@click.option(
    "--consolidation-gap",
    type=_duration(allow_zero=True),
    default="30m",
    show_default=True,
    help="The least time between two consolidations of a namespace asked for by flushes.",
)
@retention_options
@click.option(
    "--jwks-url",
    help="Also take bearer JWTs signed by the keys published at this https:// URL (the "
    "identity provider's JWKS); needs --jwt-issuer and --jwt-audience.",
)
@click.option("--jwt-issuer", help="The iss a JWT must have.")
@click.option("--jwt-audience", help="The aud a JWT must have (this server's).")
@click.option(
    "--jwt-tenant-claim",
    default="memdir_tenant",
    show_default=True,
    help="The claim of a JWT naming its tenant.",
)
@click.option(
    "--jwt-namespace-claim",
    default="memdir_namespace",
    show_default=True,
    help="The claim of a JWT naming the one namespace it reaches (optional in a token).",
)
@click.option(
    "--idempotency-ttl",
    type=ParsedType("duration", parse_duration),
    metavar="DURATION",
    default="24h",
    show_default=True,
    help="How long the answer of a write sent with an Idempotency-Key is kept (30m, 24h, 7d).",
)
@click.option(
    "--idempotency-lease",
    type=click.FloatRange(min=0, min_open=True),
    default=30.0,
    show_default=True,
    help="Seconds before a retry may take over a write whose server stopped answering.",
)
@click.option(
    "--rate",
    type=click.FloatRange(min=0),
    default=100.0,
    show_default=True,
    help="Requests a second each tenant may send to each server process (0: no limit).",
)
@click.option(
    "--burst",
    type=click.IntRange(min=1),
    default=200,
    show_default=True,
    help="Requests a tenant may send at once above its rate.",
)
@click.option(
    "--inflight-per-tenant",
    type=click.IntRange(min=0),
    default=16,
    show_default=True,
    help="Requests of one tenant each server process serves at once (0: no limit).",
)
@click.option(
    "--quota-bytes",
    type=ParsedType("size", parse_size),
    metavar="SIZE",
    default="1GiB",
    show_default=True,
    help="Bytes each tenant's namespaces may hold (64KiB, 500MB, 2GiB; 0: no quota).",
)
@click.option(
    "--quota-namespaces",
    type=click.IntRange(min=0),
    default=1000,
    show_default=True,
    help="Namespaces each tenant may have (0: no quota).",
)
@click.option(
    "--metrics-token-file",
    type=click.Path(exists=True, dir_okay=False),
    help="A file holding the bearer token GET /metrics needs (or $MEMDIR_METRICS_TOKEN); "
    "without either, /metrics answers loopback clients only.",
)
@click.option("--no-metrics", is_flag=True, help="Count nothing; /metrics answers 404.")
@pass_state
def serve_cmd(
    state: CliState,
    host: str,
    port: int,
    workers: int,
    graceful_timeout: float,
    log_namespaces: bool,
    ssl_certfile: str | None,
    ssl_keyfile: str | None,
    model_spec: str,
    max_memory_tokens: int,
    job_timeout: float,
    job_threads: int,
    import_limit: int,
    import_max_files: int,
    no_maintenance: bool,
    sweep_interval: float,
    sweep_lease: float,
    maintenance_interval: float,
    consolidation_gap: float,
    retention_days: int,
    session_retention_days: int,
    jwks_url: str | None,
    jwt_issuer: str | None,
    jwt_audience: str | None,
    jwt_tenant_claim: str,
    jwt_namespace_claim: str,
    idempotency_ttl: timedelta,
    idempotency_lease: float,
    rate: float,
    burst: int,
    inflight_per_tenant: int,
    quota_bytes: int,
    quota_namespaces: int,
    metrics_token_file: str | None,
    no_metrics: bool,
) -> None:
    """Serve the workspace's namespaces over HTTP (REST under /v1, MCP at /mcp) to the
    holders of keys.

    Each key (memdir keys create) reaches its tenant's namespaces, '<tenant>.*'. With
    --jwks-url, --jwt-issuer and --jwt-audience, bearer JWTs of that identity provider are
    taken too: the claim memdir_tenant names the tenant, scope names memdir:read, memdir:write
    or memdir:admin, memdir_namespace (optional) one namespace. Prints
    'memdir serve: listening on URL' on stdout when ready; the access log (JSON, without
    memory text, queries or keys) goes to stderr. SIGTERM or Ctrl-C stops it gracefully.
    """
    try:
        import fastapi  # noqa: F401
        import mcp.server.mcpserver  # noqa: F401  (MCP at /mcp: the SDK's v2)
        import uvicorn  # noqa: F401
    except ImportError:
        raise ConfigError(_INSTALL) from None
    if state.namespace:
        raise click.UsageError(
            "memdir serve serves every tenant's namespaces of the workspace: leave out --namespace"
        )
    from memdir.server.runner import serve
    from memdir.server.settings import ServerSettings

    state.refuse_remote("memdir serve")
    ws = state.workspace(create=True)  # one line now if the store cannot be reached
    settings = ServerSettings(
        workspace=ws.url if ws.url is not None else str(ws.base),
        host=host,
        port=port,
        workers=workers,
        graceful_timeout=graceful_timeout,
        log_namespaces=log_namespaces,
        ssl_certfile=ssl_certfile,
        ssl_keyfile=ssl_keyfile,
        model=model_spec,
        max_memory_tokens=max_memory_tokens,
        job_timeout=job_timeout,
        job_threads=job_threads,
        import_limit=import_limit,
        import_max_files=import_max_files,
        maintenance=not no_maintenance,
        sweep_interval=sweep_interval,
        sweep_lease=sweep_lease,
        maintenance_interval=maintenance_interval,
        consolidation_gap=consolidation_gap,
        retention_days=retention_days,
        session_retention_days=session_retention_days,
        jwks_url=jwks_url,
        jwt_issuer=jwt_issuer,
        jwt_audience=jwt_audience,
        jwt_tenant_claim=jwt_tenant_claim,
        jwt_namespace_claim=jwt_namespace_claim,
        idempotency_ttl=idempotency_ttl.total_seconds(),
        idempotency_lease=idempotency_lease,
        rate=rate,
        burst=burst,
        inflight_per_tenant=inflight_per_tenant,
        quota_bytes=quota_bytes,
        quota_namespaces=quota_namespaces,
        metrics=not no_metrics,
        metrics_token_file=str(Path(metrics_token_file).resolve()) if metrics_token_file else None,
    )
    if not is_loopback_host(host) and settings.scheme == "http":
        info(
            f"memdir serve: listening on {host} without TLS: keys would cross the network in "
            "clear; put a TLS proxy in front, or pass --ssl-certfile and --ssl-keyfile"
        )
    serve(settings)
