"""``memdir keys``: keys shown once, kept only as digests, with the rules of a key enforced,
on a directory workspace (a mode-0600 file) and on PostgreSQL (a table)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from _server import create_key, memdir
from memdir.agent._file_tools import read_file, write_file
from memdir.errors import MemdirError
from memdir.server.auth import KeyRecord, Scope, mint_key, open_key_store
from memdir.store.transfer import export_workspace
from memdir.workspace import Workspace


@pytest.fixture(params=["files", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A workspace of each store: a directory, or a fresh PostgreSQL schema."""
    if request.param == "files":
        return str(tmp_path / "ws")
    url: str = request.getfixturevalue("pg_url")
    return url


def _stored_text(where: str) -> str:
    """Everything the key store holds, as text."""
    if not where.startswith("postgresql://"):
        return (Path(where) / ".memdir-server" / "keys.json").read_text()
    ws = Workspace(where, create=False)
    store = ws.store
    schema = store.db.schema  # type: ignore[attr-defined]

    def dump(cur: object) -> str:
        cur.execute(f"SELECT coalesce(json_agg(k)::text, '') FROM \"{schema}\".api_keys k")  # type: ignore[attr-defined]
        return str(cur.fetchone()[0])  # type: ignore[attr-defined]

    return str(store.db.transaction(dump))  # type: ignore[attr-defined]


def test_a_key_is_shown_once_and_only_its_digest_is_kept(where: str) -> None:
    made = create_key(where, "acme", "write", "--label", "ci")
    key = made["key"]
    key_id, secret = key.removeprefix("mdk_").split("_", 1)
    assert made["key_id"] == key_id and made["tenant"] == "acme" and made["scope"] == "write"
    assert made["namespace_prefix"] == "acme." and "secret_sha256" not in made

    listed = memdir("keys", "list", "-w", where, "--json").stdout
    assert secret not in listed and key not in listed
    assert [k["key_id"] for k in json.loads(listed)] == [key_id]
    text = memdir("keys", "list", "-w", where).stdout
    assert key_id in text and "acme.*" in text and secret not in text

    stored = _stored_text(where)
    assert secret not in stored
    assert hashlib.sha256(secret.encode()).hexdigest() in stored.replace("\\x", "")


def test_the_key_file_is_private_and_refused_when_others_may_read_it(tmp_path: Path) -> None:
    where = str(tmp_path / "ws")
    create_key(where, "acme", "read")
    folder = tmp_path / "ws" / ".memdir-server"
    assert (folder.stat().st_mode & 0o777) == 0o700
    assert ((folder / "keys.json").stat().st_mode & 0o777) == 0o600
    create_key(where, "acme", "write")  # a rewrite keeps it private
    assert ((folder / "keys.json").stat().st_mode & 0o777) == 0o600

    os.chmod(folder / "keys.json", 0o644)
    done = memdir("keys", "list", "-w", where, check=False)
    assert done.returncode == 1
    assert "chmod 600" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--tenant", "acme", "--namespace-prefix", "acme.team1"], "end with '.'"),
        (["--tenant", "acme", "--namespace-prefix", "beta."], "must start with 'acme.'"),
        (["--tenant", "ACME"], "invalid tenant"),
        (["--tenant", "acme.x"], "invalid tenant"),
        (["--tenant", "acme", "--namespace", "beta.alice"], "not under the prefix"),
        (["--tenant", "acme", "--namespace", "acme."], "not under the prefix"),
        (["--tenant", "acme", "--namespace", "acme./x"], "invalid namespace"),
        (["--tenant", "acme", "--namespace-prefix", "acme..", "--namespace", "acme.x"], "prefix"),
    ],
)
def test_keys_of_a_bad_shape_are_refused_when_minted(
    tmp_path: Path, args: list[str], says: str
) -> None:
    where = str(tmp_path / "ws")
    done = memdir("keys", "create", "-w", where, "--scope", "read", *args, check=False)
    assert done.returncode == 2, done.stderr
    assert says in done.stderr and done.stdout == ""
    assert json.loads(memdir("keys", "list", "-w", where, "--json").stdout) == []


def test_a_key_reaches_one_namespace_or_a_narrower_prefix(tmp_path: Path) -> None:
    where = str(tmp_path / "ws")
    one = create_key(where, "acme", "read", "--namespace", "acme.alice")
    team = create_key(where, "acme", "write", "--namespace-prefix", "acme.team1.")
    listed = {
        k["key_id"]: k for k in json.loads(memdir("keys", "list", "-w", where, "--json").stdout)
    }
    assert listed[one["key_id"]]["namespace"] == "acme.alice"
    assert listed[team["key_id"]]["namespace_prefix"] == "acme.team1."


def test_expiry_and_revocation_show_in_the_list(where: str) -> None:
    before = datetime.now(UTC)
    soon = create_key(where, "acme", "read", "--expires", "1d")
    kept = create_key(where, "beta", "admin")
    expires = datetime.fromisoformat(soon["expires_at"])
    assert before + timedelta(days=1) <= expires <= datetime.now(UTC) + timedelta(days=1)

    done = memdir("keys", "revoke", "-w", where, soon["key_id"])
    assert "is revoked" in done.stderr
    again = memdir("keys", "revoke", "-w", where, soon["key_id"])
    assert "revoked already" in again.stderr
    unknown = memdir("keys", "revoke", "-w", where, "aaaaaaaaaaaaaaaa", check=False)
    assert unknown.returncode == 1 and "no key 'aaaaaaaaaaaaaaaa'" in unknown.stderr

    listed = json.loads(memdir("keys", "list", "-w", where, "--json").stdout)
    status = {k["key_id"]: k["status"] for k in listed}
    assert status == {soon["key_id"]: "revoked", kept["key_id"]: "active"}
    only_beta = json.loads(memdir("keys", "list", "-w", where, "--tenant", "beta", "--json").stdout)
    assert [k["key_id"] for k in only_beta] == [kept["key_id"]]


def test_concurrent_creators_keep_every_key(where: str) -> None:
    command = [sys.executable, "-m", "memdir", "keys", "create", "-w", where, "--scope", "read",
               "--json", "--tenant"]  # fmt: skip
    procs = [
        subprocess.Popen(
            [*command, f"t{i}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ),
        )
        for i in range(6)
    ]
    made = set()
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        made.add(json.loads(out)["key_id"])
    listed = json.loads(memdir("keys", "list", "-w", where, "--json").stdout)
    assert {k["key_id"] for k in listed} == made and len(made) == 6


def test_a_record_that_breaks_a_rule_is_refused_on_load_and_kept_on_rewrite(
    tmp_path: Path,
) -> None:
    ws = Workspace(tmp_path / "ws")
    store = open_key_store(ws)
    now = datetime.now(UTC)
    _, good = mint_key(tenant="acme", scope=Scope.READ, now=now)
    store.add(good)
    path = tmp_path / "ws" / ".memdir-server" / "keys.json"
    document = json.loads(path.read_text())
    widened = dict(document["keys"][0], key_id="bbbbbbbbbbbbbbbb", namespace_prefix="acme")
    document["keys"].append(widened)
    path.write_text(json.dumps(document))

    assert store.get("bbbbbbbbbbbbbbbb") is None  # "acme" would reach "acmex.y"
    assert store.get(good.key_id) == good
    _, other = mint_key(tenant="beta", scope=Scope.WRITE, now=now)
    store.add(other)
    kept = json.loads(path.read_text())["keys"]
    assert widened in kept and len(kept) == 3


def test_a_row_that_breaks_a_rule_is_refused(pg_url: str) -> None:
    ws = Workspace(pg_url)
    store = open_key_store(ws)
    _, record = mint_key(tenant="acme", scope=Scope.ADMIN, now=datetime.now(UTC))
    store.add(record)
    schema = ws.store.db.schema  # type: ignore[attr-defined]
    ws.store.db.transaction(  # type: ignore[attr-defined]
        lambda cur: cur.execute(f"UPDATE \"{schema}\".api_keys SET namespace_prefix = 'a'")
    )
    assert store.get(record.key_id) is None and store.records() == []


def test_keys_stay_out_of_exports_and_of_the_agents_file_tools(tmp_path: Path) -> None:
    where = tmp_path / "ws"
    create_key(str(where), "acme", "admin")
    ws = Workspace(where)
    export_workspace(ws, tmp_path / "copy")
    assert not (tmp_path / "copy" / ".memdir-server").exists()
    with pytest.raises(MemdirError, match="outside the files read_file may read"):
        read_file(".memdir-server/keys.json", workspace=ws)
    with pytest.raises(MemdirError, match="holds the server's keys"):
        write_file(".memdir-server/keys.json", "{}", workspace=ws)
    assert KeyRecord.from_json(
        json.loads((where / ".memdir-server/keys.json").read_text())["keys"][0]
    )


class _Ticks:
    """A monotonic clock that moves only when told."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_authenticator_forgets_a_revoked_key_at_the_next_poll(where: str) -> None:
    from memdir.server.auth import AuthError, KeyAuthenticator

    ws = Workspace(where)
    store = open_key_store(ws)
    key, record = mint_key(tenant="acme", scope=Scope.WRITE, now=datetime.now(UTC))
    store.add(record)
    ticks = _Ticks()
    auth = KeyAuthenticator(store, monotonic=ticks)
    auth.poll()
    assert auth.authenticate(key).tenant == "acme"  # now cached for CACHE_SECONDS
    store.revoke(record.key_id, datetime.now(UTC))
    assert auth.authenticate(key).key_id == record.key_id  # the cache still holds it...
    assert auth.poll() is True  # ...until the poll sees the store change, with no time passing
    with pytest.raises(AuthError, match="was revoked") as raised:
        auth.authenticate(key)
    assert raised.value.reason == "revoked"
    assert auth.poll() is False


def test_the_authenticator_checks_expiry_and_records_last_use(where: str) -> None:
    from memdir.server.auth import AuthError, KeyAuthenticator
    from memdir.server.auth._authenticator import ABSENT_SECONDS, TOUCH_SECONDS

    ws = Workspace(where)
    store = open_key_store(ws)
    minted = datetime.now(UTC)
    key, record = mint_key(
        tenant="acme", scope=Scope.READ, now=minted, expires_at=minted + timedelta(hours=1)
    )
    ticks = _Ticks()
    instant = [minted]
    auth = KeyAuthenticator(store, clock=lambda: instant[0], monotonic=ticks)
    with pytest.raises(AuthError) as unknown:
        auth.authenticate(key)  # not stored yet: unknown, remembered as such for a second
    assert unknown.value.reason == "invalid"
    store.add(record)
    with pytest.raises(AuthError):
        auth.authenticate(key)
    ticks.now += ABSENT_SECONDS
    assert auth.authenticate(key).scope is Scope.READ
    ticks.now += TOUCH_SECONDS
    auth.poll()
    stored = store.get(record.key_id)
    assert stored is not None and stored.last_used_at == minted
    instant[0] = minted + timedelta(hours=1)
    with pytest.raises(AuthError, match="has expired"):
        auth.authenticate(key)
