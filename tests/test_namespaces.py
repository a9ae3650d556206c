"""Namespaces: many isolated memories in one workspace, and nothing crossing between them."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memdir import HarnessAgent, IsolationScope, namespace_for
from memdir.agent import read_file
from memdir.cli import cli
from memdir.errors import ConfigError, MemdirError, WorkspaceError
from memdir.messages import Msg, ToolUseBlock
from memdir.testing import FunctionModel, ModelCall
from memdir.tools import call_tool, memory_add, memory_get, memory_search
from memdir.workspace import Workspace

USERS = ("alice", "bob", "carol")


def _secret(user: str) -> str:
    return f"secretword{user}"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A workspace root with a memory at the root and one per user, each with its own word."""
    base = tmp_path / "ws"
    _populate(base)
    return base


@pytest.fixture
def pg_root(pg_url: str) -> str:
    """The same memories in a PostgreSQL workspace."""
    _populate(pg_url)
    return pg_url


def _populate(base: Path | str) -> None:
    rootws = Workspace(base)
    rootws.write_text("MEMORY.md", f"## Template\n- codeword {_secret('root')} at the root\n")
    for user in USERS:
        ws = Workspace(base, namespace=user)
        ws.write_text("MEMORY.md", f"## About\n- codeword {_secret(user)} is curated\n")
        assert "Saved" in memory_add(f"{user} noted codeword {_secret(user)}", workspace=ws)


# -- names -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["", ".", "..", "a/b", "../bob", "a\x00b", "a\nb", "tab\there", "Alice", "-lead", "_lead",
     "x" * 129, "名字", "a b", "ns/../x", "/abs", "a\\b", "a:b"],
)  # fmt: skip
def test_bad_names_are_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(ConfigError):
        Workspace(tmp_path / "ws", namespace=name)
    assert not (tmp_path / "ws" / "ns").exists() or not any((tmp_path / "ws" / "ns").iterdir())


def test_good_names_and_the_root_layout_is_unchanged(tmp_path: Path) -> None:
    base = tmp_path / "ws"
    root = Workspace(base)
    for name in ("alice", "u-1024", "a.b_c+d@example.com", "x" * 128):
        ws = Workspace(base, namespace=name)
        assert ws.root == base / "ns" / name and ws.base == base
        assert (ws.root / "memory").is_dir() and (ws.root / "sessions").is_dir()
    assert root.root == base and root.namespace is None
    assert root.namespaces() == sorted(["alice", "u-1024", "a.b_c+d@example.com", "x" * 128])


def test_namespace_for_maps_callers_like_the_reference_and_cannot_be_spoofed() -> None:
    assert namespace_for(user_id="alice", session_id="s1") == "alice"
    assert namespace_for(session_id="s1") == "s1"
    assert namespace_for() is None
    assert namespace_for(IsolationScope.SESSION, user_id="alice", session_id="s1") == "s1"
    assert namespace_for("agent", agent_id="support-bot") == "support-bot"
    assert namespace_for(IsolationScope.GLOBAL, user_id="alice") is None
    email = namespace_for(user_id="Alice@Example.com")
    assert email is not None and email.startswith("id-") and len(email) == 35
    assert namespace_for(user_id="Alice@Example.com") == email  # stable
    assert namespace_for(user_id="alice@example.com") != email  # distinct ids, distinct names
    # A caller who may choose its id cannot take the hashed name of somebody else's.
    assert namespace_for(user_id=email) != email
    for odd in ("a/b", "../x", "x" * 500, "名字", "a\x00b"):
        name = namespace_for(user_id=odd)
        assert name is not None and name.startswith("id-")
    with pytest.raises(ConfigError, match="session_id"):
        namespace_for(IsolationScope.SESSION)
    with pytest.raises(ConfigError, match="scope"):
        namespace_for("tenant", user_id="a")


# -- isolation ---------------------------------------------------------------------------------


def test_each_namespace_sees_only_its_own_memory(root: Path) -> None:
    for user in USERS:
        found = memory_search("codeword", max_results=50, workspace=root, namespace=user)
        assert _secret(user) in found
        for other in (*USERS, "root"):
            if other != user:
                assert _secret(other) not in found
        assert _secret(user) in memory_get("MEMORY.md", workspace=root, namespace=user)


def test_no_read_falls_back_to_the_root(tmp_path: Path) -> None:
    base = tmp_path / "ws"
    Workspace(base).write_text("MEMORY.md", "- template fact at the root\n")
    fresh = Workspace(base, namespace="dave")
    assert fresh.read_text("MEMORY.md") == ""
    assert "template" not in memory_get("MEMORY.md", workspace=fresh)
    agent = HarnessAgent(
        model=FunctionModel(lambda call: "ok"), workspace=base, namespace="dave", maintenance=None
    )
    assert agent.context_hook is not None
    assert "template fact" not in agent.context_hook.render("s")


@pytest.mark.parametrize(
    "path",
    ["../bob/MEMORY.md", "../../ns/bob/MEMORY.md", "ns/bob/MEMORY.md", "../../MEMORY.md",
     "memory/../../bob/memory/x.md"],
)  # fmt: skip
def test_paths_never_reach_another_namespace(root: Path, path: str) -> None:
    alice = Workspace(root, namespace="alice")
    out = memory_get(path, workspace=alice)
    assert out.startswith("Error:") and _secret("bob") not in out
    assert _secret("bob") not in read_file(path, workspace=alice) if _reads(alice, path) else True
    bob_file = str(root / "ns" / "bob" / "MEMORY.md")
    assert memory_get(bob_file, workspace=alice).startswith("Error:")


def _reads(ws: Workspace, path: str) -> bool:
    try:
        read_file(path, workspace=ws)
    except MemdirError:
        return False
    return True


def test_the_root_cannot_read_or_write_the_namespaces(root: Path) -> None:
    rootws = Workspace(root)
    with pytest.raises(MemdirError):
        read_file("ns/bob/MEMORY.md", workspace=rootws)
    assert memory_get("ns/bob/MEMORY.md", workspace=rootws).startswith("Error:")
    found = memory_search("codeword", max_results=50, workspace=rootws)
    assert _secret("root") in found and not any(_secret(u) in found for u in USERS)
    from memdir.agent import list_files, write_file

    with pytest.raises(MemdirError):
        list_files("ns", recursive=True, workspace=rootws)
    assert "ns" not in list_files(".", recursive=False, workspace=rootws).split()
    with pytest.raises(MemdirError, match="other callers"):
        write_file("ns/bob/MEMORY.md", "- taken over\n", workspace=rootws)
    assert "taken over" not in (root / "ns" / "bob" / "MEMORY.md").read_text("utf-8")


def test_a_namespace_directory_that_is_a_symlink_is_refused(root: Path) -> None:
    (root / "ns" / "mallory").symlink_to(root / "ns" / "bob")
    with pytest.raises(WorkspaceError, match="symlink"):
        Workspace(root, namespace="mallory")
    assert "mallory" not in Workspace(root).namespaces()


def test_the_agent_keeps_sessions_and_memory_in_its_namespace(root: Path) -> None:
    def model(call: ModelCall) -> Msg | str:
        if call.messages[-1].role == "tool":
            return "done: " + call.messages[-1].tool_results[0].text[:200]
        if call.task is not None:
            return "NO_REPLY"
        # The model tries to reach bob's memory through a hidden argument.
        use = ToolUseBlock(
            id="c1", name="memory_search", input={"query": "codeword", "namespace": "bob"}
        )
        return Msg.assistant(tool_calls=[use])

    agent = HarnessAgent(
        model=FunctionModel(model), workspace=root, namespace="alice", maintenance=None
    )
    reply = agent.call_sync("find the secret")
    agent.close_sync()
    assert "unexpected argument" in reply.text and _secret("bob") not in reply.text
    assert (root / "ns" / "alice" / "sessions" / "default.state.json").is_file()
    assert not (root / "sessions" / "default.state.json").exists()


def test_call_tool_keeps_the_namespace_out_of_the_models_hands(root: Path) -> None:
    out = call_tool("memory_search", {"query": "codeword", "namespace": "bob"}, workspace=root)
    assert out.startswith("Error:") and "unexpected" in out
    mine = call_tool("memory_search", {"query": "codeword"}, workspace=root, namespace="carol")
    assert _secret("carol") in mine and _secret("bob") not in mine


# 1,000 random callers, paths and queries, the same cases on each store.
_thousand_cases = settings(
    max_examples=1_000, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
_random_cases = given(
    user=st.sampled_from(USERS),
    path=st.one_of(
        st.sampled_from(["MEMORY.md", "memory", "../", "ns", "../../ns/bob", "..", "/"]),
        st.text(alphabet="./nsbolicearMEMORY-_d", max_size=40),
    ),
    query=st.one_of(st.sampled_from(["codeword", "secretwordbob", "*", "\"", "ns/bob"]),
                    st.text(max_size=30)),
)  # fmt: skip


@_thousand_cases
@_random_cases
def test_random_namespace_path_and_query_never_reach_another_namespace(
    root: Path, user: str, path: str, query: str
) -> None:
    _never_reaches_another(root, user, path, query)


@_thousand_cases
@_random_cases
def test_random_namespace_path_and_query_never_reach_another_namespace_in_postgresql(
    pg_root: str, user: str, path: str, query: str
) -> None:
    _never_reaches_another(pg_root, user, path, query)


def _never_reaches_another(root: Path | str, user: str, path: str, query: str) -> None:
    # Another namespace's word, unless the query itself holds it (a no-match note repeats it).
    others = [_secret(u) for u in (*USERS, "root") if u != user and _secret(u) not in query]
    outputs = [
        memory_search(query or "x", max_results=50, workspace=root, namespace=user),
        memory_get(path or "x", workspace=root, namespace=user),
        memory_get(f"{path}/MEMORY.md", workspace=root, namespace=user),
    ]
    ws = Workspace(root, namespace=user)
    for candidate in (path, f"{path}/MEMORY.md"):
        try:
            outputs.append(read_file(candidate or "x", workspace=ws))
        except MemdirError:
            pass
    assert not any(word in out for out in outputs for word in others)


# -- command line ------------------------------------------------------------------------------


def test_cli_namespace_option_and_environment(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runner = CliRunner()
    out = runner.invoke(cli, ["-w", str(root), "--namespace", "bob", "search", "codeword"])
    assert out.exit_code == 0 and _secret("bob") in out.output
    assert _secret("alice") not in out.output
    monkeypatch.setenv("MEMDIR_NAMESPACE", "alice")
    out = runner.invoke(cli, ["-w", str(root), "search", "codeword"])
    assert _secret("alice") in out.output and _secret("bob") not in out.output
    monkeypatch.delenv("MEMDIR_NAMESPACE")
    bad = runner.invoke(cli, ["-w", str(root), "--namespace", "../bob", "search", "x"])
    assert bad.exit_code == 2 and "invalid namespace" in bad.output
    listed = runner.invoke(cli, ["-w", str(root), "namespaces", "--json"])
    assert json.loads(listed.output) == sorted(USERS)


@pytest.mark.parametrize("store", ["files", "postgres"])
def test_an_empty_namespace_is_refused_never_the_root(
    store: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    # an application that fills MEMDIR_NAMESPACE from an empty user id must not write into the
    # shared root memory
    base = str(request.getfixturevalue("root" if store == "files" else "pg_root"))
    before = Workspace(base).read_text(Workspace(base).ledger_rel(), missing_ok=True)
    runner = CliRunner()
    by_option = runner.invoke(cli, ["-w", base, "--namespace", "", "add", "planted fact"])
    monkeypatch.setenv("MEMDIR_NAMESPACE", "")
    by_env = runner.invoke(cli, ["-w", base, "add", "planted fact"])
    for result in (by_option, by_env):
        assert result.exit_code == 2, result.output
        assert "a namespace must not be empty" in result.output
    assert Workspace(base).read_text(Workspace(base).ledger_rel(), missing_ok=True) == before
    with pytest.raises(ConfigError, match="a namespace must not be empty"):
        Workspace(base, namespace="")


@pytest.mark.parametrize("store", ["files", "postgres"])
def test_a_missing_namespace_is_named_not_reported_as_a_missing_workspace(
    store: str, request: pytest.FixtureRequest
) -> None:
    base = str(request.getfixturevalue("root" if store == "files" else "pg_root"))
    result = CliRunner().invoke(cli, ["-w", base, "-n", "dave", "search", "codeword"])
    assert result.exit_code == 1
    assert f"no namespace 'dave' in the workspace at {base}" in result.output
    assert f"it has {len(USERS)}: 'memdir namespaces' lists them" in result.output
    assert "run 'memdir init'" not in result.output


def test_an_empty_user_id_is_refused_never_the_root() -> None:
    for blank in ("", "   "):
        with pytest.raises(ConfigError, match="user_id is empty"):
            namespace_for(user_id=blank)
        with pytest.raises(ConfigError, match="session_id is empty"):
            namespace_for(session_id=blank)
        with pytest.raises(ConfigError, match="agent_id is empty"):
            namespace_for("agent", agent_id=blank)


def test_maintain_all_namespaces_runs_each_one(root: Path) -> None:
    result = CliRunner().invoke(cli, ["-w", str(root), "maintain", "--all-namespaces", "--json"])
    assert result.exit_code == 0, result.output
    decoder, text, reports = json.JSONDecoder(), result.output.strip(), []
    while text:
        report, end = decoder.raw_decode(text)
        reports.append(report)
        text = text[end:].strip()
    assert [r["namespace"] for r in reports] == [None, *sorted(USERS)]
    for user in USERS:  # each consolidated its own ledger into its own MEMORY.md
        memory = (root / "ns" / user / "MEMORY.md").read_text("utf-8")
        assert _secret(user) in memory
        assert not any(_secret(o) in memory for o in USERS if o != user)
    assert os.listdir(root / "ns") and not (root / "memory" / "ns").exists()
