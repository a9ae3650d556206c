"""``memdir chat``: an interactive agent on the workspace, showing its memory at work.

Replies go to stdout (on a terminal, as the model writes them); tool calls, compactions and
memory writes go to stderr as they happen.
Each turn runs on one event loop that lives as long as the chat, so the agent's background
memory work is drained after every reply (and its writes shown) before the next prompt.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console

from memdir.cli._common import (
    EXIT_HELP,
    CliState,
    base_url_option,
    context_window_option,
    err_console,
    out_console,
    pass_state,
)
from memdir.cli._ingest_cmd import build_model, model_option
from memdir.errors import MemdirError
from memdir.messages import SUMMARY_NAME

if TYPE_CHECKING:
    from memdir.agent import AgentEvent, HarnessAgent
    from memdir.compaction import CompactionEvent

__all__ = ["ChatRepl", "chat_cmd"]

HELP = """\
/compact        summarise the conversation so far (originals go to the session log)
/memory         show MEMORY.md and today's ledger
/search QUERY   search the memory as the agent's memory_search tool does
/new            start the conversation afresh (memory is kept)
/help           this list
/exit           leave (Ctrl-D too)"""

_CLIP = 160

MODEL_HELP = (
    'The model you chat with; it also writes the summaries and the memory notes: "openai:<model>", '
    '"anthropic:<model>", "ollama:<model>"..., or "extractive" (offline; it only quotes the '
    "conversation back) [env MEMDIR_MODEL]"
)


def _clip(text: str, limit: int = _CLIP) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


class ChatRepl:
    """The read-eval-print loop of ``memdir chat``.

    Args:
        agent: the agent (its workspace, session and model are used as they are).
        session_id: the session to talk in.
        out: where replies and command output go.
        err: where events, notes and errors go.
        prompt: show a prompt before each input line (when stdin is a terminal).
        stream: print the reply as the model writes it (default: when ``out`` is a
            terminal); otherwise each reply is printed whole once it is complete.
    """

    def __init__(
        self,
        agent: HarnessAgent,
        session_id: str,
        *,
        out: Console,
        err: Console,
        prompt: bool,
        stream: bool | None = None,
    ) -> None:
        self.agent = agent
        self.stream = out.is_terminal if stream is None else stream
        self._streamed = ""  # the text of the current answer printed so far
        self._streamed_reply: str | None = None  # id of the last answer printed as it came
        self.ws = agent.workspace
        self.session_id = session_id
        self.out = out
        self.err = err
        self.prompt = prompt
        self.loop = asyncio.new_event_loop()
        self.failed = False
        """Whether a turn failed (the model could not be called or answered with an error)."""
        self._compact_refusal: list[str] | None = None  # reasons, while /compact runs
        if agent.compaction_hook is not None:
            agent.compaction_hook.compactor.add_listener(self._on_compaction)

    # -- the loop -------------------------------------------------------------------------

    def run(self, lines: Iterator[str]) -> None:
        """Read lines until ``/exit`` or the end of input; drain memory work before leaving."""
        try:
            self._banner()
            while True:
                if self.prompt:
                    self.err.print("[bold cyan]you›[/] ", end="")
                line = next(lines, None)
                if line is None:
                    break
                text = line.strip()
                if not text:
                    continue
                if text.startswith("/"):
                    if not self.command(text):
                        break
                    continue
                self.turn(text)
        finally:
            self.loop.run_until_complete(self.agent.close())
            self.loop.close()

    def _banner(self) -> None:
        count = len(self.agent.history(self.session_id))
        model = getattr(self.agent.model, "name", type(self.agent.model).__name__)
        where = f"workspace {self.ws.describe()}, session {self.session_id!r}"
        resumed = f", resuming {count} messages" if count else ""
        self.err.print(f"memdir chat — {model} — {where}{resumed}. /help for commands.")

    def turn(self, text: str) -> None:
        """One user message: stream the call, then drain and show the memory writes."""
        marks = self._marks()
        task = self.loop.create_task(self._stream(text))
        try:
            self.loop.run_until_complete(task)
        except KeyboardInterrupt:
            task.cancel()
            self.loop.run_until_complete(asyncio.gather(task, return_exceptions=True))
            self.err.print("(interrupted; the conversation keeps what was completed)")
            self._withdraw()
        except MemdirError as exc:
            self.failed = True
            self.err.print(f"Error: {exc}", markup=False)
            self._withdraw()
        self._settle(marks)

    def _withdraw(self) -> None:
        """Take the unanswered input of a failed turn back out of the session.

        The user retries by sending the text again, so it must not stay behind (each failed
        attempt would otherwise add another unanswered message).
        """
        try:
            removed = self.loop.run_until_complete(
                self.agent.discard_unanswered(session_id=self.session_id)
            )
        except MemdirError as exc:
            self.err.print(f"Error: {exc}", markup=False)
            return
        if removed:
            self.err.print("(your message was not kept; send it again to retry)")
        elif self.agent.history(self.session_id)[-1:] and (
            self.agent.history(self.session_id)[-1].role == "tool"
        ):
            # Tools already ran for it: their effects happened, so the turn is kept.
            self.err.print(
                "(the reply failed after its tool calls ran; the message and their results are "
                "kept: send 'continue' to get the answer)"
            )

    async def _stream(self, text: str) -> None:
        async for event in self.agent.stream(text, session_id=self.session_id):
            self.show(event)

    # -- events ---------------------------------------------------------------------------

    def show(self, event: AgentEvent) -> None:
        """Print one agent event (replies on ``out``, everything else on ``err``)."""
        from memdir.agent import (
            ContextOverflowEvent,
            HookErrorEvent,
            ModelDeltaEvent,
            PostActingEvent,
            PostCallEvent,
            PostReasoningEvent,
            PreActingEvent,
        )
        from memdir.eviction import EVICTED_KEY

        err = self.err
        if isinstance(event, ModelDeltaEvent):
            if self.stream and event.delta.kind == "text" and event.delta.text:
                self.out.print(event.delta.text, end="", markup=False, highlight=False)
                self._streamed += event.delta.text
        elif isinstance(event, PreActingEvent):
            args = json.dumps(event.tool_call.input, ensure_ascii=False)
            err.print(f"  ⚙ {event.tool_call.name}({_clip(args, 120)})", style="dim", markup=False)
        elif isinstance(event, PostActingEvent):
            flag = " (error)" if event.result.is_error else ""
            moved = event.metadata.get(EVICTED_KEY) or {}
            if event.tool_call.id in moved:
                flag += f" (evicted to {moved[event.tool_call.id]['path']})"
            err.print(f"    ↳ {_clip(event.result.text)}{flag}", style="dim", markup=False)
        elif isinstance(event, PostReasoningEvent):
            message = event.response.message
            streamed, self._streamed = self._streamed, ""
            if streamed and (message.tool_uses or not message.text.strip()):
                # Text before tool calls (or a refused empty answer): end its line.
                self.out.print(markup=False, highlight=False)
            elif message.tool_uses and message.text.strip():
                err.print(f"  {_clip(message.text)}", style="dim italic", markup=False)
            if streamed and not message.tool_uses and message.text.strip():
                self._streamed_reply = message.id
        elif isinstance(event, PostCallEvent):
            if self._streamed_reply == event.reply.id:
                self.out.print(markup=False, highlight=False)  # the reply is on screen: end it
            else:
                self.out.print(event.reply.text, markup=False, highlight=False)
            self._streamed_reply = None
        elif isinstance(event, ContextOverflowEvent):
            if event.recovered:
                what = "made it smaller, retrying"
            else:
                notes = getattr(event.error, "__notes__", None) or ["no way to make it smaller"]
                what = "could not recover: " + " ".join(notes).removeprefix("memdir: ")
            err.print(
                f"  the model refused the request as too long; {what}",
                style="yellow",
                markup=False,
            )
        elif isinstance(event, HookErrorEvent):
            err.print(
                f"  warning: {event.hook} failed: {event.error}", style="yellow", markup=False
            )

    def _on_compaction(self, event: CompactionEvent) -> None:
        if event.kind == "compaction.completed":
            where = ""
            if event.log_path and event.log_start_line is not None:
                where = (
                    f"; originals in {event.log_path}#L{event.log_start_line}-L{event.log_end_line}"
                )
            self.err.print(
                f"  ⧉ compacted ({event.reason}): {event.messages_before} → "
                f"{event.messages_after} messages, ~{event.tokens_before:,} → "
                f"~{event.tokens_after or 0:,} tokens{where}",
                style="magenta",
                markup=False,
            )
        elif event.kind == "compaction.failed":
            if self._compact_refusal is not None:  # /compact says it once, as its answer
                self._compact_refusal.append(event.reason)
                return
            self.err.print(f"  compaction did not run: {event.reason}", style="dim", markup=False)

    # -- memory writes --------------------------------------------------------------------

    def _marks(self) -> dict[str, int]:
        rels = [self.ws.ledger_rel(), "MEMORY.md"]
        return {rel: self._size(rel) for rel in rels}

    def _size(self, rel: str) -> int:
        try:
            st = self.ws.stat(rel)
        except (OSError, MemdirError):
            return 0
        return st.size if st is not None else 0

    def _settle(self, marks: dict[str, int]) -> None:
        """Wait for the background flush, then show what reached the memory files."""
        if not self.loop.run_until_complete(self.agent.drain(self.agent.close_timeout)):
            self.err.print("  (memory work still running; it finishes in the background)")
        for rel in {*marks, self.ws.ledger_rel()} - {"MEMORY.md"}:
            start = marks.get(rel, 0)
            if self._size(rel) <= start:
                continue
            added = self.ws.read_from(rel, start).decode("utf-8", errors="replace")
            for line in added.splitlines():
                if line.startswith("- "):
                    self.err.print(f"  ✎ {rel}: {line}", style="green", markup=False)
        if self._size("MEMORY.md") != marks.get("MEMORY.md"):
            lines = len(self.ws.read_text("MEMORY.md").splitlines())
            self.err.print(f"  ✎ MEMORY.md consolidated ({lines} lines)", style="green")

    # -- slash commands -------------------------------------------------------------------

    def command(self, text: str) -> bool:
        """Run a slash command; returns ``False`` for ``/exit``."""
        name, _, arg = text.partition(" ")
        name = name.lower()
        if name in {"/exit", "/quit"}:
            return False
        if name == "/help":
            self.out.print(HELP, markup=False, highlight=False)
        elif name == "/memory":
            self._show_memory()
        elif name == "/search":
            self._search(arg.strip())
        elif name == "/compact":
            self._compact()
        elif name == "/new":
            self.agent.reset(self.session_id)
            self.err.print("(new conversation; memory is kept)")
        else:
            self.err.print(f"unknown command {name}; /help lists them", markup=False)
        return True

    def _show_memory(self) -> None:
        for rel in ("MEMORY.md", self.ws.ledger_rel()):
            text = self.ws.read_text(rel)
            self.err.print(f"── {rel}", style="bold cyan", markup=False)
            self.out.print(text.rstrip() or "(empty)", markup=False, highlight=False)

    def _search(self, query: str) -> None:
        from memdir.tools import memory_search

        if not query:
            self.err.print("usage: /search QUERY")
            return
        self.out.print(memory_search(query, 5, workspace=self.ws), markup=False, highlight=False)

    def _compact(self) -> None:
        if self.agent.compaction_hook is None:
            self.err.print("compaction is off for this agent")
            return
        history = self.agent.history(self.session_id)
        fresh = [m for m in history if m.role != "system" and m.name != SUMMARY_NAME]
        if len(fresh) <= 1:  # at most the latest request, which is always kept verbatim
            self.err.print(f"nothing to compact ({len(history)} messages)")
            return
        self._compact_refusal = []
        try:
            result = self.loop.run_until_complete(
                self.agent.compact(session_id=self.session_id, keep_messages=0)
            )
        except MemdirError as exc:
            self.err.print(f"Error: {exc}", markup=False)
            return
        finally:
            refusal, self._compact_refusal = self._compact_refusal, None
        if result is None:
            why = f": {refusal[-1]}" if refusal else ""
            self.err.print(f"nothing to compact ({len(history)} messages){why}", markup=False)


def _lines(stream: Any) -> Iterator[str]:
    while True:
        line = stream.readline()
        if not line:
            return
        yield line


@click.command("chat", epilog=EXIT_HELP)
@model_option(None, help=MODEL_HELP)
@base_url_option
@context_window_option
@click.option(
    "--stream/--no-stream",
    "stream",
    default=None,
    help="Print each reply as the model writes it (default: when stdout is a terminal).",
)
@click.option(
    "--session-id",
    default="chat",
    show_default=True,
    metavar="ID",
    help="The conversation to continue or start (kept in sessions/<id>.state.json).",
)
@pass_state
def chat_cmd(
    state: CliState,
    model_spec: str | None,
    base_url: str | None,
    context_window: int | None,
    stream: bool | None,
    session_id: str,
) -> None:
    """Talk to an agent whose memory is this workspace.

    The agent searches and cites its memory (memory_search, memory_get, memory_add), reads and
    writes files in the workspace, compacts the conversation when it grows, and saves durable
    facts to memory/YYYY-MM-DD.md after each reply. Tool calls, compactions and memory writes
    are shown on stderr as they happen; replies go to stdout. The conversation is kept, so
    the same --session-id continues it later.

    \b
    /compact /memory /search QUERY /new /help /exit (or Ctrl-D)
    Ctrl-C stops the current reply; at the prompt it leaves (exit code 130).
    A message that got no reply (the model failed) is not kept: send it again to retry
    (unless tools already ran for it: then it is kept, and 'continue' gets the answer).
    With input from a pipe, the exit code is 1 if any message got no reply.
    """
    from memdir.agent import HarnessAgent

    if not model_spec:
        raise click.UsageError(
            "choose a model with --model (or $MEMDIR_MODEL): openai:gpt-4o-mini, "
            "anthropic:claude-sonnet-4-5, ollama:llama3.1, or extractive (offline; it only "
            "quotes the conversation back)"
        )
    model = build_model(model_spec, base_url, context_window=context_window)
    agent = HarnessAgent(
        name="chat", model=model, workspace=state.workspace(), session_id=session_id
    )
    repl = ChatRepl(
        agent,
        agent.session_id,
        out=out_console,
        err=err_console,
        prompt=sys.stdin.isatty(),
        stream=stream,
    )
    repl.run(_lines(sys.stdin))
    if repl.failed and not repl.prompt:
        # Scripted input: a turn that got no reply is a failure the caller must see.
        raise SystemExit(1)
