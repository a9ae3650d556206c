"""``memdir forget`` and ``memdir namespaces delete``: erasure, previewed then confirmed."""

from __future__ import annotations

import sys

import click

from memdir.cli._common import EXIT_HELP, CliState, echo_json, pass_state

__all__ = ["confirmed", "forget_cmd"]


def confirmed(question: str, yes: bool) -> bool:
    """Whether to go on: ``--yes``, or a yes typed on a terminal; never a guess in a script.

    Raises:
        click.UsageError: not on a terminal and no ``--yes``.
    """
    if yes:
        return True
    if not sys.stdin.isatty():
        raise click.UsageError("nothing was removed: confirm with --yes (stdin is not a terminal)")
    return click.confirm(question, default=False)


@click.command("forget", epilog=EXIT_HELP)
@click.argument("what", required=False)
@click.option("--search", "query", metavar="QUERY", help="Forget the facts of the best hits.")
@click.option("--limit", default=3, show_default=True, help="Hits --search takes.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask (scripts).")
@click.option("--by", default="person", show_default=True, help="Who asked (in the record).")
@click.option("--json", "as_json", is_flag=True, help="Print the preview and result as JSON.")
@pass_state
def forget_cmd(
    state: CliState,
    what: str | None,
    query: str | None,
    limit: int,
    yes: bool,
    by: str,
    as_json: bool,
) -> None:
    """Erase a fact from every place it lives: WHAT is its text, or a line
    (memory/2026-11-30.md#L3). A preview first, then (confirmed) the erasure; the ledger
    keeps a record without the text. Exit code 1 when nothing holds it."""
    from memdir.forget import Target, apply_forget, plan_forget

    state.refuse_remote("forget")
    if (what is None) == (query is None):
        raise click.UsageError("give the text (or a file#Lline) to forget, or --search QUERY")
    if query is not None:
        target = Target(search=query, limit=limit)
    else:
        assert what is not None
        target = Target.of(what)
    ws = state.workspace(create=False)
    plan = plan_forget(ws, target)
    if as_json:
        echo_json(
            {
                "facts": plan.facts,
                "places": [
                    {"path": p.path, "lines": p.lines, "deleted": p.deleted} for p in plan.places
                ],
            }
        )
    else:
        click.echo(plan.describe())
    if plan.empty:
        sys.exit(1)
    if not confirmed("Erase it from all of these places?", yes):
        click.echo("Nothing was removed.", err=True)
        sys.exit(1)
    report = apply_forget(ws, plan, by=by)
    if as_json:
        echo_json({"erased": report.erased, "files": list(report.files),
                   "deleted": list(report.deleted), "records": report.records,
                   "record": report.record})  # fmt: skip
    else:
        click.echo(report.describe())
