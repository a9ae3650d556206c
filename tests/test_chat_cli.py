"""``memdir chat``: the interactive agent, driven by scripted input lines and a fake model."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from memdir.cli import _chat_cmd, cli
from memdir.cli._chat_cmd import ChatRepl
from memdir.errors import ContextOverflowError, ModelError
from memdir.messages import SUMMARY_NAME, Msg, ToolUseBlock
from memdir.models import ExtractiveModel
from memdir.testing import FunctionModel, ModelCall
from memdir.tools._core import close_shared_indexes


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("MEMDIR_MODEL", raising=False)
    monkeypatch.setenv("MEMDIR_TZ", "UTC")
    yield
    close_shared_indexes()


class FakeAgentModel:
    """Answers memdir's own tasks extractively; chat turns by a small script."""

    def __init__(self, *, fail_on: str | None = None) -> None:
        self.extractive = ExtractiveModel()
        self.chat_calls: list[ModelCall] = []
        self.fail_on = fail_on
        self.model = FunctionModel(self.reply)

    async def reply(self, call: ModelCall) -> Msg:
        if call.task is not None:
            return (await self.extractive.generate(call.messages, system=call.system)).message
        self.chat_calls.append(call)
        last = call.messages[-1]
        if self.fail_on and self.fail_on in call.last_user_text and last.role == "user":
            raise ModelError("the provider answered 503", status_code=503)
        if last.role == "tool":
            return Msg.assistant(f"Found it: {last.tool_results[0].text.splitlines()[1][:200]}")
        if "decide" in last.text:
            call_ = ToolUseBlock(id="c1", name="memory_search", input={"query": "PostgreSQL"})
            return Msg.assistant("Let me check my notes.", tool_calls=[call_])
        return Msg.assistant(f"ok ({len(call.messages)} messages)")


def _chat(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    lines: str,
    fake: FakeAgentModel | None = None,
    *args: str,
) -> tuple[int, str, str, FakeAgentModel]:
    fake = fake or FakeAgentModel()
    monkeypatch.setattr(_chat_cmd, "build_model", lambda spec, base_url, **_: fake.model)
    ws = tmp_path / "ws"
    if not (ws / "memory").exists():
        CliRunner().invoke(cli, ["-w", str(ws), "add", "Decision: move the shop to PostgreSQL 16"])
    result = CliRunner().invoke(
        cli, ["-w", str(ws), "chat", "--model", "openai:fake", *args], input=lines
    )
    return result.exit_code, result.stdout, result.stderr, fake


def test_tool_calls_replies_and_memory_writes_are_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = "What did we decide about the database?\nRemember that I prefer tabs over spaces.\n"
    code, out, err, fake = _chat(tmp_path, monkeypatch, lines + "/exit\n")
    assert code == 0, err
    assert "Found it: " in out and "PostgreSQL 16" in out
    assert '⚙ memory_search({"query": "PostgreSQL"})' in err
    assert "↳ 1 result for" in err and "Let me check my notes." in err
    ledger = next((tmp_path / "ws" / "memory").glob("20*.md"))
    assert "tabs over spaces" in ledger.read_text("utf-8")
    assert f"✎ memory/{ledger.name}: - " in err and "tabs over spaces" in err
    # The memory tools were offered, and the conversation is kept for next time.
    assert {t.name for t in fake.chat_calls[0].tools or []} >= {"memory_search", "memory_get"}
    state = json.loads((tmp_path / "ws" / "sessions" / "chat.state.json").read_text("utf-8"))
    assert len(state["messages"]) == 6


def test_a_session_is_resumed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _chat(tmp_path, monkeypatch, "My cat is called Miso.\n")
    code, out, err, fake = _chat(tmp_path, monkeypatch, "Hello again.\n")
    assert code == 0 and "resuming 2 messages" in err
    assert any("Miso" in m.text for m in fake.chat_calls[0].messages)
    assert "ok (3 messages)" in out
    # Another session starts empty.
    code, out, _, _ = _chat(tmp_path, monkeypatch, "Hi.\n", None, "--session-id", "other")
    assert code == 0 and "ok (1 messages)" in out


def test_slash_commands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lines = "/help\n/search PostgreSQL\n/search\n/memory\n/nope\nSay hi.\n/new\nAgain.\n"
    code, out, err, _ = _chat(tmp_path, monkeypatch, lines)  # ends without /exit: Ctrl-D
    assert code == 0
    assert "/compact" in out and "/exit" in out
    assert "memory/" in out and "[Memory Add" in out and "PostgreSQL 16" in out
    assert "usage: /search QUERY" in err
    assert "── MEMORY.md" in err and "unknown command /nope" in err
    assert out.count("ok (1 messages)") == 2  # /new started afresh


def test_compact_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Turns long enough that their summary is smaller than they are.
    chatter = " ".join(f"Aside {k}: the weather was nice that week." for k in range(12))
    turns = "".join(f"Step {i}: I prefer option {i}. {chatter}\n" for i in range(4))
    code, _, err, _ = _chat(tmp_path, monkeypatch, turns + "/compact\n/compact\n")
    assert code == 0, err
    assert "⧉ compacted (forced): 8 → 2 messages" in err
    assert "originals in sessions/chat.log.jsonl#L1-L8" in err
    assert "nothing to compact (2 messages)" in err
    state = json.loads((tmp_path / "ws" / "sessions" / "chat.state.json").read_text("utf-8"))
    kept = [Msg.from_dict(m) for m in state["messages"]]
    assert [m.name for m in kept] == [SUMMARY_NAME, None] and "Step 3" in kept[1].text
    log = (tmp_path / "ws" / "sessions" / "chat.log.jsonl").read_text("utf-8")
    assert all(f"Step {i}:" in log for i in range(3))


def test_compact_on_a_short_chat_says_nothing_to_compact_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, _, err, _ = _chat(tmp_path, monkeypatch, "Hello.\n/compact\n")
    assert code == 0, err
    (line,) = [line for line in err.splitlines()[1:] if line.strip()]  # one line, no warnings
    assert line.startswith("nothing to compact (2 messages): the summary would not make")


def test_a_model_error_does_not_end_the_chat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeAgentModel(fail_on="boom")
    code, out, err, _ = _chat(tmp_path, monkeypatch, "boom\nStill there?\n", fake)
    assert code == 1  # piped input: a message without a reply is a failure
    assert "Error: the provider answered 503" in err
    assert "send it again to retry" in err
    assert "ok (1 messages)" in out  # the failed message did not stay in the conversation


def test_an_overflow_that_cannot_be_recovered_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Refusing(FakeAgentModel):
        async def reply(self, call: ModelCall) -> Msg:
            if call.task is None:  # every chat request is too long, whatever its size
                raise ContextOverflowError("the input length exceeds the context length")
            return await super().reply(call)

    code, _, err, _ = _chat(tmp_path, monkeypatch, "Hello.\nHi.\nStill there?\n", Refusing())
    assert code == 1
    assert "the model refused the request as too long; could not recover: the request" in err
    assert "use a model with a larger context window" in err


def test_failed_attempts_leave_no_unanswered_messages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeAgentModel(fail_on="boom")
    for _ in range(3):
        code, _, err, _ = _chat(tmp_path, monkeypatch, "boom, please\n", fake)
        assert code == 1 and "resuming" not in err
    code, out, err, _ = _chat(tmp_path, monkeypatch, "Hello.\n", fake)
    assert code == 0 and "resuming" not in err and "ok (1 messages)" in out
    state = json.loads((tmp_path / "ws" / "sessions" / "chat.state.json").read_text("utf-8"))
    assert [m["role"] for m in state["messages"]] == ["user", "assistant"]


def test_a_model_must_be_chosen(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["-w", str(tmp_path / "ws"), "chat"], input="hi\n")
    assert result.exit_code == 2 and "choose a model with --model" in result.stderr
    result = CliRunner().invoke(
        cli, ["-w", str(tmp_path / "ws"), "chat"], input="", env={"MEMDIR_MODEL": "nosuch:x"}
    )
    assert result.exit_code == 1 and "unknown model provider" in result.stderr


def test_context_window_reaches_the_chat_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A local server has no known window: the option gives the agent's compaction one.
    seen: list[ChatRepl] = []
    monkeypatch.setattr(_chat_cmd.ChatRepl, "run", lambda self, lines: seen.append(self))
    ws = str(tmp_path / "ws")
    for args, env in [
        (["--context-window", "8192"], {}),
        ([], {"MEMDIR_CONTEXT_WINDOW": "8192"}),
    ]:
        result = CliRunner().invoke(
            cli, ["-w", ws, "chat", "--model", "ollama:llama3.1", *args], input="", env=env
        )
        assert result.exit_code == 0, result.output
    unknown = CliRunner().invoke(cli, ["-w", ws, "chat", "--model", "ollama:llama3.1"], input="")
    assert unknown.exit_code == 0, unknown.output
    assert [repl.agent.model.context_window for repl in seen] == [8192, 8192, None]
    hook = seen[0].agent.compaction_hook
    assert hook is not None and hook.compactor.context_window == 8192
    bad = CliRunner().invoke(
        cli, ["-w", ws, "chat", "--model", "extractive", "--context-window", "0"]
    )
    assert bad.exit_code == 2 and "positive whole number of tokens" in bad.stderr


def test_model_help_says_it_is_the_model_you_chat_with() -> None:
    result = CliRunner().invoke(cli, ["chat", "--help"])
    help_text = " ".join(result.stdout.split())
    assert "--model SPEC The model you chat with; it also writes the summaries" in help_text
    assert "--context-window TOKENS" in help_text


class _Recorder:
    """A terminal stand-in that remembers each write, to see text arrive in pieces."""

    def __init__(self) -> None:
        self.writes: list[str] = []

    def write(self, text: str) -> int:
        self.writes.append(text)
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return True


def _repl(tmp_path: Path, model: FunctionModel, stream: bool | None) -> tuple[ChatRepl, _Recorder]:
    from rich.console import Console

    from memdir.agent import HarnessAgent

    out, err = _Recorder(), _Recorder()
    agent = HarnessAgent(
        model=model, workspace=tmp_path / "ws", memory_flush=False, maintenance=None
    )
    repl = ChatRepl(
        agent,
        "chat",
        out=Console(file=out, force_terminal=True, width=200),  # type: ignore[arg-type]
        err=Console(file=err, width=200),  # type: ignore[arg-type]
        prompt=False,
        stream=stream,
    )
    return repl, out


def test_on_a_terminal_the_reply_is_printed_as_the_model_writes_it(tmp_path: Path) -> None:
    answer = "PostgreSQL 16 was chosen for the shop on Monday."
    repl, out = _repl(tmp_path, FunctionModel(lambda call: answer), stream=None)
    assert repl.stream  # a terminal streams by default
    repl.run(iter(["Which database?\n"]))
    text_writes = [w for w in out.writes if w.strip()]
    assert len(text_writes) > 5  # word by word, not one block at the end
    assert "".join(out.writes).count(answer) == 1  # shown once, not again when complete


def test_text_before_a_tool_call_ends_its_line_and_the_reply_follows(tmp_path: Path) -> None:
    def answer(call: ModelCall) -> Msg:
        if call.messages[-1].role == "tool":
            return Msg.assistant("Found it.")
        use = ToolUseBlock(id="c1", name="memory_search", input={"query": "db"})
        return Msg.assistant("Let me look.", tool_calls=[use])

    repl, out = _repl(tmp_path, FunctionModel(answer), stream=True)
    repl.run(iter(["Which database?\n"]))
    assert "".join(out.writes).replace("\x1b[0m", "") == "Let me look.\nFound it.\n"


def test_no_stream_prints_each_reply_whole(tmp_path: Path) -> None:
    repl, out = _repl(tmp_path, FunctionModel(lambda call: "one two three four"), stream=False)
    repl.run(iter(["hi\n"]))
    assert [w for w in out.writes if w.strip()] == ["one two three four\n"]


def test_a_failure_after_tools_ran_keeps_the_turn_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def answer(call: ModelCall) -> Msg:
        if call.messages[-1].role == "tool":
            raise ModelError("the provider answered 503", status_code=503)
        use = ToolUseBlock(id="c1", name="memory_search", input={"query": "db"})
        return Msg.assistant(tool_calls=[use])

    fake = FakeAgentModel()
    fake.model = FunctionModel(answer)
    code, _, err, _ = _chat(tmp_path, monkeypatch, "Which database?\n", fake)
    assert code == 1
    assert "after its tool calls ran" in err and "send it again" not in err
