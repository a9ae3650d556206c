"""``memdir keys create|list|revoke``: the API keys of ``memdir serve``, per tenant.

Keys are managed on the server's host, with the workspace's own access (its directory or its
PostgreSQL URL); a key is shown once, when it is created, and only its digest is stored.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import click

from memdir.cli._common import (
    EXIT_HELP,
    CliState,
    ParsedType,
    echo_json,
    info,
    own_workspace_option,
    pass_state,
)
from memdir.cli._maintain_cmds import parse_duration
from memdir.errors import ConfigError

__all__ = ["keys_group"]

_SCOPES = click.Choice(["read", "write", "admin"])


def _key_store(state: CliState, *, create: bool) -> Any:
    from memdir.server.auth import open_key_store

    if state.namespace:
        raise click.UsageError(
            "keys belong to the whole workspace, not to a namespace: leave out --namespace"
        )
    state.refuse_remote("memdir keys")
    return open_key_store(state.workspace(create=create))


def _shown(record: Any, now: datetime) -> dict[str, Any]:
    """A record as ``keys list --json`` prints it: everything but the digest."""
    data: dict[str, Any] = record.to_json()
    del data["secret_sha256"]
    data["status"] = record.status(now)
    return data


def _reach(record: Any) -> str:
    return record.namespace if record.namespace is not None else f"{record.namespace_prefix}*"


@click.group("keys", epilog=EXIT_HELP)
def keys_group() -> None:
    """API keys of 'memdir serve': create, list and revoke them (see docs/server.md).

    A key belongs to a tenant and reaches the namespaces named '<tenant>.*' (or a narrower
    prefix, or one namespace). Keys are kept as digests in the workspace: a mode-0600 file
    .memdir-server/keys.json of a directory, or a table of a PostgreSQL workspace.
    """


@keys_group.command("create", epilog=EXIT_HELP)
@own_workspace_option
@click.option("--tenant", required=True, metavar="TENANT", help="The tenant (e.g. acme).")
@click.option(
    "--namespace-prefix",
    metavar="PREFIX",
    help="Reach only the namespaces starting with PREFIX, which starts with '<tenant>.' and "
    "ends with '.' (e.g. acme.team1.) [default: <tenant>.].",
)
@click.option("--namespace", metavar="NAME", help="Reach only this one namespace.")
@click.option("--scope", type=_SCOPES, required=True, help="read, write (and read) or admin.")
@click.option("--label", default="", help="A note for you: who or what holds the key.")
@click.option(
    "--expires",
    type=ParsedType("duration", parse_duration),
    metavar="DURATION",
    help="Expire after DURATION (30d, 12h, 1d12h) [default: never].",
)
@click.option("--json", "as_json", is_flag=True, help="Print the key and its record as JSON.")
@pass_state
def create_cmd(
    state: CliState,
    tenant: str,
    namespace_prefix: str | None,
    namespace: str | None,
    scope: str,
    label: str,
    expires: timedelta | None,
    as_json: bool,
) -> None:
    """Create a key and print it on stdout, once: it is not stored and cannot be shown again."""
    from memdir.server.auth import Scope, mint_key

    store = _key_store(state, create=True)
    now = datetime.now(UTC)
    try:
        key, record = mint_key(
            tenant=tenant,
            scope=Scope.parse(scope),
            now=now,
            namespace_prefix=namespace_prefix,
            namespace=namespace,
            label=label,
            expires_at=None if expires is None else now + expires,
        )
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    store.add(record)
    if as_json:
        echo_json({"key": key, **_shown(record, now)})
        return
    click.echo(key)
    until = "" if record.expires_at is None else f", expires {record.expires_at:%Y-%m-%d %H:%M} UTC"
    info(
        f"key {record.key_id} for tenant {record.tenant}: {scope} on {_reach(record)}{until}. "
        "It is shown this once: keep it in a secret store."
    )


@keys_group.command("list", epilog=EXIT_HELP)
@own_workspace_option
@click.option("--tenant", metavar="TENANT", help="Only this tenant's keys.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list on stdout.")
@pass_state
def list_cmd(state: CliState, tenant: str | None, as_json: bool) -> None:
    """List the keys (never their secrets): id, tenant, scope, reach, status, dates, label."""
    records = _key_store(state, create=False).records(tenant)
    now = datetime.now(UTC)
    if as_json:
        echo_json([_shown(record, now) for record in records])
        return
    for record in records:
        used = record.last_used_at
        fields = [
            record.key_id,
            record.tenant,
            record.scope.label,
            _reach(record),
            record.status(now),
            f"created {record.created_at:%Y-%m-%d}",
            f"expires {record.expires_at:%Y-%m-%d %H:%M}" if record.expires_at else "no expiry",
            f"used {used:%Y-%m-%d %H:%M}" if used else "never used",
        ]
        click.echo("  ".join(fields) + (f"  {record.label}" if record.label else ""))
    if not records:
        info("no keys" + (f" for tenant {tenant}" if tenant else "") + ": memdir keys create")


@keys_group.command("revoke", epilog=EXIT_HELP)
@own_workspace_option
@click.argument("key_id")
@pass_state
def revoke_cmd(state: CliState, key_id: str) -> None:
    """Revoke the key KEY_ID (the 16 characters after 'mdk_'); a running server refuses it
    within about two seconds."""
    wanted = key_id.strip()
    now = datetime.now(UTC)
    record = _key_store(state, create=False).revoke(wanted, now)
    if record is None:
        raise ConfigError(f"no key {wanted[:40]!r} here: memdir keys list shows the keys")
    if record.revoked_at is not None and record.revoked_at < now:
        info(f"key {record.key_id} was revoked already, at {record.revoked_at:%Y-%m-%d %H:%M} UTC")
        return
    info(f"key {record.key_id} of tenant {record.tenant} is revoked")
