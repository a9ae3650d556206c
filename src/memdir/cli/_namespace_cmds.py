"""``memdir namespaces``: the isolated memories a workspace holds, and deleting one."""

from __future__ import annotations

import click

from memdir.cli._common import EXIT_HELP, CliState, echo_json, pass_state

__all__ = ["namespaces_cmd"]


@click.group("namespaces", epilog=EXIT_HELP, invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list on stdout.")
@click.pass_context
def namespaces_cmd(ctx: click.Context, as_json: bool) -> None:
    """List the namespaces of the workspace (one a line), as --namespace takes them."""
    state = ctx.ensure_object(CliState)
    if state.namespace:
        raise click.UsageError("namespaces works on those of the root: leave out --namespace")
    if ctx.invoked_subcommand is not None:
        return
    names = state.workspace(create=False).namespaces()
    if as_json:
        echo_json(names)
        return
    for name in names:
        click.echo(name)


@namespaces_cmd.command("delete", epilog=EXIT_HELP)
@click.argument("name")
@click.option("--yes", "-y", is_flag=True, help="Do not ask (scripts).")
@click.option("--by", default="person", show_default=True, help="Who asked (in the record).")
@pass_state
def delete_cmd(state: CliState, name: str, yes: bool, by: str) -> None:
    """Delete the namespace NAME whole (a user's memory): its files, index, vectors, locks
    and the API keys bound to it. The other namespaces are not touched; the root keeps an
    audit record without content."""
    from memdir.cli._forget_cmd import confirmed
    from memdir.errors import MemdirError
    from memdir.forget import delete_namespace

    state.refuse_remote("namespaces delete")
    ws = state.workspace(create=False)
    if name not in ws.namespaces():
        raise MemdirError(f"there is no namespace {name!r}: nothing deleted")
    click.echo(f"This deletes every file, row, index entry and key of namespace {name!r}.")
    if not confirmed(f"Delete namespace {name!r}?", yes):
        click.echo("Nothing was deleted.", err=True)
        raise SystemExit(1)
    done = delete_namespace(ws, name, by=by)
    click.echo(
        f"Deleted namespace {name!r}: {done.files} file(s), {done.keys_revoked} key(s) revoked."
    )
