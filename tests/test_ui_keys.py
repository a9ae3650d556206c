"""The API keys page, in a real browser and over HTTP, on both stores: an admin makes a key
(its secret shown once), logs in with it and revokes it (which ends that session); a write
key cannot open the page; an admin never sees, makes or revokes another tenant's key or one
wider than its own; ``memdir ui`` manages every tenant's keys."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

from _browser import Page
from _server import Served, create_key, memdir, serve_store
from _ui import UiServer
from memdir.server.app import create_app
from memdir.server.auth import Scope, mint_key, open_key_store
from memdir.server.settings import ServerSettings
from memdir.store.workspace import Workspace
from test_ui_forget import SAME_SITE, field

SECRET = re.compile(r"mdk_[a-z2-7]{16}_")


@pytest.fixture(scope="module", params=["files", "postgres"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    yield from serve_store(request, tmp_path_factory)


@pytest.fixture(scope="module")
def ui(served: Served) -> UiServer:
    return UiServer(served)


@contextmanager
def session(served: Served, key: str) -> Iterator[tuple[httpx.Client, str]]:
    """A client logged in with ``key``, and its CSRF token (from the header's logout form)."""
    with served.client() as client:
        client.cookies.set("memdir_ui", key)
        yield client, field(client.get("/ui/").text, "csrf")


def stored(served: Served) -> list[dict[str, Any]]:
    """Every key record of the workspace, as ``memdir keys list --json`` prints them."""
    listed: list[dict[str, Any]] = json.loads(
        memdir("keys", "list", "-w", served.workspace, "--json").stdout
    )
    return listed


def test_a_made_key_is_shown_once_logs_in_and_revoking_it_ends_its_session(
    served: Served, page: Page
) -> None:
    page.login(served.keys.secrets["acme_admin"]).open("/ui/keys")
    page.screenshot("keys")
    page.find("#k-scope").send_keys("admin")
    page.find("#k-label").send_keys("release laptop")
    page.find("#k-expires").send_keys("30")
    page.go(page.find("#create-key"))
    page.assert_nothing_ran()
    assert page.path == "/ui/keys", "the secret is never in an address"
    key = page.find("#new-secret").get_attribute("value")
    assert key.startswith("mdk_")
    page.screenshot("key-created")
    page.open("/ui/keys")
    assert key not in page.driver.page_source
    key_id = key.split("_")[1]
    row = page.text(f"#key-{key_id}")
    assert "release laptop" in row and "admin" in row and "active" in row

    page.logout()
    page.login(key)
    assert page.path == "/ui/"
    page.open(f"/ui/keys/revoke?id={key_id}")
    assert "logs you out" in page.text(".warning")
    page.go(page.find("#revoke"))
    page.assert_nothing_ran()
    assert page.path.startswith("/ui/login"), "the revoked key's session ended"
    page.open("/ui/")
    assert page.path.startswith("/ui/login")
    page.login(key)
    assert "revoked" in page.text("#login-error")
    [record] = [r for r in stored(served) if r["key_id"] == key_id]
    assert record["status"] == "revoked" and record["tenant"] == "acme"


def test_a_write_key_cannot_open_or_post_the_keys_page(served: Served) -> None:
    with session(served, served.keys.secrets["acme_write"]) as (client, csrf):
        assert client.get("/ui/keys").status_code == 403
        made = client.post("/ui/keys", data={"csrf": csrf, "scope": "admin"}, headers=SAME_SITE)
        assert made.status_code == 403 and not SECRET.search(made.text)
        revoke = client.post(
            "/ui/keys/revoke",
            data={"csrf": csrf, "key_id": served.keys.ids["acme_admin"]},
            headers=SAME_SITE,
        )
        assert revoke.status_code == 403
    [admin] = [r for r in stored(served) if r["key_id"] == served.keys.ids["acme_admin"]]
    assert admin["status"] == "active"


def test_an_admin_stays_within_its_tenant_and_its_own_reach(served: Served) -> None:
    ids = served.keys.ids
    with session(served, served.keys.secrets["acme_admin"]) as (client, csrf):
        listed = client.get("/ui/keys").text
        assert ids["acme_read"] in listed and ids["team1"] in listed
        assert ids["beta_write"] not in listed and ids["beta_admin"] not in listed
        for hostile, status in (
            ({"tenant": "beta"}, 403),
            ({"namespace_prefix": "beta."}, 403),
            ({"namespace": "beta.bob"}, 403),
            ({"namespace_prefix": "acme.", "namespace": "beta.bob"}, 403),
            ({"scope": "root"}, 400),
        ):
            form = {"csrf": csrf, "scope": "write", "label": "hostile", **hostile}
            answer = client.post("/ui/keys", data=form, headers=SAME_SITE)
            assert answer.status_code == status, hostile
            assert not SECRET.search(answer.text), hostile
        own = {"csrf": csrf, "scope": "write", "label": "own", "namespace_prefix": ""}
        assert SECRET.search(client.post("/ui/keys", data=own, headers=SAME_SITE).text)
        gone = client.post(
            "/ui/keys/revoke", data={"csrf": csrf, "key_id": ids["beta_write"]}, headers=SAME_SITE
        )
        assert gone.status_code == 404
        assert client.get(f"/ui/keys/revoke?id={ids['beta_admin']}").status_code == 404
    made = [(r["tenant"], r["namespace_prefix"]) for r in stored(served) if r["label"] == "own"]
    assert made == [("acme", "acme.")]
    assert not [r for r in stored(served) if r["label"] == "hostile"]
    with served.client("beta_write") as beta:
        assert beta.get("/v1/whoami").status_code == 200, "beta's key was not revoked"

    narrow = create_key(
        served.workspace, "acme", "admin", "--namespace-prefix", "acme.team1.", "--label", "t1"
    )
    with session(served, narrow["key"]) as (client, csrf):
        listed = client.get("/ui/keys").text
        assert ids["team1"] in listed and ids["acme_admin"] not in listed
        for wider in ({"namespace_prefix": "acme."}, {"namespace": "acme.alice"}):
            form = {"csrf": csrf, "scope": "read", "label": "wider", **wider}
            assert client.post("/ui/keys", data=form, headers=SAME_SITE).status_code == 403
        inside = {"csrf": csrf, "scope": "read", "namespace_prefix": "acme.team1.ci."}
        assert client.post("/ui/keys", data=inside, headers=SAME_SITE).status_code == 200
        wide = client.post(
            "/ui/keys/revoke", data={"csrf": csrf, "key_id": ids["acme_admin"]}, headers=SAME_SITE
        )
        assert wide.status_code == 404
    assert not [r for r in stored(served) if r["label"] == "wider"]


def test_memdir_ui_manages_every_tenants_keys(tmp_path: Path) -> None:
    root = Workspace(str(tmp_path / "ws"), create=True)
    store = open_key_store(root)
    ids = []
    for tenant in ("acme", "beta"):
        _, record = mint_key(tenant=tenant, scope=Scope.READ, now=datetime.now(UTC))
        store.add(record)
        ids.append(record.key_id)
    settings = ServerSettings(workspace=str(tmp_path / "ws"), maintenance=False, ui_local=True)
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as client:
        shown = client.get("/ui/keys")
        assert shown.status_code == 200 and "of every tenant" in shown.text
        assert all(key_id in shown.text for key_id in ids)
        form = {"csrf": field(shown.text, "csrf"), "tenant": "gamma", "scope": "write"}
        made = client.post("/ui/keys", data=form)
        assert made.status_code == 200
        assert SECRET.search(made.text)
    assert [r.tenant for r in open_key_store(root).records("gamma")] == ["gamma"]
