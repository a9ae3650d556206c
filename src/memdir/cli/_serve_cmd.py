"""``memdir serve``: the REST API over HTTP, with a key per tenant (see docs/server.md)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

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
from memdir.cli._options import shown, stacked
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


_POSITIVE = click.FloatRange(min=0, min_open=True)
_FILE = click.Path(exists=True, dir_okay=False)

_LISTEN = stacked(
    shown("--host", None, "127.0.0.1", "Interface to listen on."),
    shown("--port", click.IntRange(0, 65535), 8000,
          "TCP port; 0 takes any free port (the URL is printed when the server is ready)."),
    shown("--workers", click.IntRange(1, 256), 1, "Processes."),
    shown("--graceful-timeout", _POSITIVE, 30.0,
          "Seconds requests in flight get to finish on SIGTERM."),
    click.option("--log-namespaces", is_flag=True,
                 help="Write namespace names in the access log (default: a hash of each)."),
    click.option("--ssl-certfile", type=_FILE,
                 help="Serve HTTPS with this PEM certificate chain (or put a TLS proxy in front)."),
    click.option("--ssl-keyfile", type=_FILE, help="Its PEM private key."),
)  # fmt: skip

_JOBS = stacked(
    shown("--max-memory-tokens", click.IntRange(min=50), 4000,
          "MEMORY.md budget of consolidations, in tokens."),
    shown("--job-timeout", _POSITIVE, 300.0,
          "Seconds a flush, compaction, consolidation or maintenance run may take."),
    shown("--job-threads", click.IntRange(1, 256), 4,
          "Jobs running at once per process (each tenant runs one at a time)."),
    shown("--import-limit", click.IntRange(1, IMPORT_LIMIT_MAX), 256 << 20,
          "The largest archive an import takes, in bytes (sent, and unpacked)."),
    shown("--import-max-files", click.IntRange(min=1), 10_000,
          "The most files an imported archive may hold."),
)  # fmt: skip

_MAINTENANCE = stacked(
    click.option("--no-maintenance", is_flag=True,
                 help="Do not maintain the namespaces in the background (run memdir maintain "
                 "--all-namespaces from cron instead)."),
    shown("--sweep-interval", _duration(), "60",
          "Time between two passes of the background maintenance over every namespace "
          "(seconds, or 30s, 5m...)."),
    shown("--sweep-lease", _duration(), "120",
          "How long the sweep lease lasts unrenewed: another replica takes the passes over "
          "that long after the sweeping one died on another host."),
    shown("--maintenance-interval", _duration(), "6h",
          "Time between two full maintenance runs of a namespace."),
    shown("--consolidation-gap", _duration(allow_zero=True), "30m",
          "The least time between two consolidations of a namespace asked for by flushes."),
)  # fmt: skip

_JWT = stacked(
    click.option("--jwks-url",
                 help="Also take bearer JWTs signed by the keys published at this https:// URL "
                 "(the identity provider's JWKS); needs --jwt-issuer and --jwt-audience."),
    click.option("--jwt-issuer", help="The iss a JWT must have."),
    click.option("--jwt-audience", help="The aud a JWT must have (this server's)."),
    shown("--jwt-tenant-claim", None, "memdir_tenant", "The claim of a JWT naming its tenant."),
    shown("--jwt-namespace-claim", None, "memdir_namespace",
          "The claim of a JWT naming the one namespace it reaches (optional in a token)."),
)  # fmt: skip

_IDEMPOTENCY = stacked(
    shown("--idempotency-ttl", ParsedType("duration", parse_duration), "24h",
          "How long the answer of a write sent with an Idempotency-Key is kept (30m, 24h, 7d).",
          metavar="DURATION"),
    shown("--idempotency-lease", _POSITIVE, 30.0,
          "Seconds before a retry may take over a write whose server stopped answering."),
)  # fmt: skip

_LIMITS = stacked(
    shown("--rate", click.FloatRange(min=0), 100.0,
          "Requests a second each tenant may send to each server process (0: no limit)."),
    shown("--burst", click.IntRange(min=1), 200,
          "Requests a tenant may send at once above its rate."),
    shown("--inflight-per-tenant", click.IntRange(min=0), 16,
          "Requests of one tenant each server process serves at once (0: no limit)."),
    shown("--quota-bytes", ParsedType("size", parse_size), "1GiB",
          "Bytes each tenant's namespaces may hold (64KiB, 500MB, 2GiB; 0: no quota).",
          metavar="SIZE"),
    shown("--quota-namespaces", click.IntRange(min=0), 1000,
          "Namespaces each tenant may have (0: no quota)."),
)  # fmt: skip

_METRICS = stacked(
    click.option("--metrics-token-file", type=_FILE,
                 help="A file holding the bearer token GET /metrics needs (or "
                 "$MEMDIR_METRICS_TOKEN); without either, /metrics answers loopback clients "
                 "only."),
    click.option("--no-metrics", is_flag=True, help="Count nothing; /metrics answers 404."),
    click.option("--no-ui", is_flag=True,
                 help="Leave out the web UI (/ui, where a tenant logs in with a key)."),
)  # fmt: skip


@click.command("serve", epilog=EXIT_HELP)
@own_workspace_option
@_LISTEN
@model_option(
    "extractive",
    help="Model of flushes, compactions and consolidations: extractive (offline), "
    "provider:model such as openai:gpt-4o-mini, or python:MODULE:FUNCTION [env MEMDIR_MODEL].",
)
@_JOBS
@_MAINTENANCE
@retention_options
@_JWT
@_IDEMPOTENCY
@_LIMITS
@_METRICS
@pass_state
def serve_cmd(
    state: CliState,
    /,
    host: str,
    model_spec: str,
    no_maintenance: bool,
    idempotency_ttl: timedelta,
    metrics_token_file: str | None,
    no_metrics: bool,
    no_ui: bool,
    **options: Any,
) -> None:
    """Serve the workspace's namespaces over HTTP (REST under /v1, MCP at /mcp) to the
    holders of keys.

    The web UI is at /ui/: a tenant logs in with one of its keys (docs/ui.md).
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
        model=model_spec,
        maintenance=not no_maintenance,
        idempotency_ttl=idempotency_ttl.total_seconds(),
        metrics=not no_metrics,
        ui=not no_ui,
        metrics_token_file=str(Path(metrics_token_file).resolve()) if metrics_token_file else None,
        **options,  # every other option is the setting of its name
    )
    if not is_loopback_host(host) and settings.scheme == "http":
        info(
            f"memdir serve: listening on {host} without TLS: keys would cross the network in "
            "clear; put a TLS proxy in front, or pass --ssl-certfile and --ssl-keyfile"
        )
    serve(settings)
