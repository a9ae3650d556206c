"""Opening a workspace on a real ``memdir serve``: the namespace (given, or the key's own),
the key (argument, ``$MEMDIR_API_KEY``, ``$MEMDIR_API_KEY_FILE``) kept out of every repr,
message and log, and one clear error for each mistake."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from _server import Served, fresh_namespace
from memdir.client import AuthError
from memdir.errors import ConfigError, WorkspaceError
from memdir.workspace import Workspace


@pytest.fixture(params=["files"])
def served(request: pytest.FixtureRequest, remote_servers: object) -> Served:
    found: Served = remote_servers.get(request.param)  # type: ignore[attr-defined]
    return found


def test_the_namespace_is_the_given_one_or_the_keys_own(served: Served) -> None:
    url, keys = served.server.url, served.keys.secrets
    bound = Workspace(url, api_key=keys["alice_only"])
    assert bound.namespace == "acme.alice" and bound.remote is not None
    assert bound.describe() == f"{url} (namespace 'acme.alice')"
    assert repr(bound) == f"Workspace({url!r}, namespace='acme.alice')"
    with pytest.raises(ConfigError, match=r"give -n acme\.<name>"):
        Workspace(url, api_key=keys["acme_write"])
    with pytest.raises(ConfigError, match="out of this key's reach"):
        Workspace(url, namespace="beta.x", api_key=keys["acme_write"])
    with pytest.raises(ConfigError, match="out of this key's reach"):
        Workspace(url, namespace="acme.bob", api_key=keys["alice_only"])
    with pytest.raises(WorkspaceError, match="on a memdir server"):
        _ = bound.root


def test_the_key_comes_from_the_environment_or_its_file(
    served: Served, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    ns = fresh_namespace()
    monkeypatch.delenv("MEMDIR_API_KEY", raising=False)
    monkeypatch.delenv("MEMDIR_API_KEY_FILE", raising=False)
    with pytest.raises(ConfigError, match="no API key"):
        Workspace(served.server.url, namespace=ns)
    key_file = tmp_path / "key"
    key_file.write_text(served.keys.secrets["acme_write"] + "\n")
    monkeypatch.setenv("MEMDIR_API_KEY_FILE", str(key_file))
    Workspace(served.server.url, namespace=ns).write_text("notes/a.md", "from the file\n")
    monkeypatch.setenv("MEMDIR_API_KEY", served.keys.secrets["acme_read"])
    monkeypatch.setenv("MEMDIR_WORKSPACE", served.server.url)
    reader = Workspace(namespace=ns, create=False)
    assert reader.read_text("notes/a.md") == "from the file\n"
    with pytest.raises(WorkspaceError, match="scope"):
        reader.write_text("notes/a.md", "a read key writes nothing\n")


def test_the_key_is_in_no_repr_message_or_log(
    served: Served, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    secret = served.keys.secrets["acme_write"]
    ws = Workspace(served.server.url, namespace=fresh_namespace(), api_key=secret)
    ws.write_text("notes/a.md", "x\n")
    shown = [repr(ws), ws.describe(), repr(ws.store), repr(ws.remote), str(vars(ws))]
    wrong = secret[:-4] + ("aaaa" if not secret.endswith("aaaa") else "bbbb")
    with pytest.raises(AuthError) as refused:
        Workspace(served.server.url, namespace=fresh_namespace(), api_key=wrong)
    shown.append(str(refused.value))
    with pytest.raises(ConfigError) as bad:
        Workspace("http://10.1.2.3:8000", namespace="acme.x", api_key=secret)
    shown.append(str(bad.value))
    shown.extend(record.getMessage() for record in caplog.records)
    for text in shown:
        assert secret not in text and wrong not in text
        assert secret[-12:] not in text
