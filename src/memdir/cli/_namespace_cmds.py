"""``memdir namespaces``: the isolated memories a workspace holds."""

from __future__ import annotations

import click

from memdir.cli._common import EXIT_HELP, CliState, echo_json, pass_state

__all__ = ["namespaces_cmd"]


@click.command("namespaces", epilog=EXIT_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list on stdout.")
@pass_state
def namespaces_cmd(state: CliState, as_json: bool) -> None:
    """List the namespaces of the workspace (one a line), as --namespace takes them."""
    if state.namespace:
        raise click.UsageError("namespaces lists those of the root: leave out --namespace")
    names = state.workspace(create=False).namespaces()
    if as_json:
        echo_json(names)
        return
    for name in names:
        click.echo(name)
