"""``memdir ui``: the web UI for one person, on loopback, without a key (see docs/ui.md)."""

from __future__ import annotations

import click

from memdir._net import is_loopback_host
from memdir.cli._common import EXIT_HELP, CliState, own_workspace_option, pass_state
from memdir.errors import ConfigError

__all__ = ["ui_cmd"]

_INSTALL = "memdir ui needs the server extra: pip install 'memdir[server]'"


@click.command("ui", epilog=EXIT_HELP)
@own_workspace_option
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Loopback interface to listen on (127.0.0.1, ::1 or localhost; memdir serve shares "
    "memory with others, with keys).",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8765,
    show_default=True,
    help="TCP port; 0 takes any free port (the URL is printed when the UI is ready).",
)
@pass_state
def ui_cmd(state: CliState, host: str, port: int) -> None:
    """See, search and correct the workspace's memory in a browser.

    Serves the web UI at http://127.0.0.1:PORT/ui/ to this machine only, without a key:
    the workspace itself and each of its namespaces, MEMORY.md with where each bullet came
    from, its history and edits, the ledgers, sessions, search and forgetting. Prints
    'memdir ui: open URL' when ready; Ctrl-C stops it.
    """
    try:
        import fastapi  # noqa: F401
        import jinja2  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        raise ConfigError(_INSTALL) from None
    if not is_loopback_host(host):
        raise click.UsageError(
            f"memdir ui listens on loopback only (no key protects it), not {host}: "
            "run memdir serve to reach memory from other machines"
        )
    if state.namespace:
        raise click.UsageError(
            "memdir ui shows the workspace and every namespace in it: leave out --namespace"
        )
    from memdir.server.runner import serve
    from memdir.server.settings import ServerSettings

    state.refuse_remote("memdir ui")
    ws = state.workspace(create=False)
    settings = ServerSettings(
        workspace=ws.url if ws.url is not None else str(ws.base),
        host=host,
        port=port,
        maintenance=False,
        metrics=False,
        ui_local=True,
    )
    serve(settings)
