"""The OpenAPI document: generated from the code, committed as ``docs/openapi.json`` (this fails
when the copy is out of date), every error answer a problem, stable operation ids, and what a
real server answers at ``/openapi.json`` on each store."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from _server import Served
from memdir.server.app import create_app
from memdir.server.openapi import build_openapi, render
from memdir.server.policy import PolicyRoute
from memdir.server.problems import PROBLEM_JSON
from memdir.server.settings import ServerSettings

COMMITTED = Path(__file__).parent.parent / "docs" / "openapi.json"
REGENERATE = "python -m memdir.server.openapi > docs/openapi.json"


def _document(tmp_path: Path) -> tuple[dict[str, Any], list[PolicyRoute]]:
    app = create_app(ServerSettings(workspace=str(tmp_path / "ws")))
    routes = [r for r in app.routes if isinstance(r, PolicyRoute) and r.include_in_schema]
    return build_openapi(app), routes


def _operations(document: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (path, method, operation)
        for path, item in document["paths"].items()
        for method, operation in item.items()
    ]


def test_the_committed_document_is_what_the_code_makes(tmp_path: Path) -> None:
    document, _ = _document(tmp_path)
    committed = COMMITTED.read_text(encoding="utf-8")
    assert json.loads(committed) == document, f"docs/openapi.json is out of date: {REGENERATE}"
    assert committed == render(document), f"docs/openapi.json is not as made: {REGENERATE}"


def test_the_regeneration_command_prints_the_document() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "memdir.server.openapi"],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == COMMITTED.read_text(encoding="utf-8")


def test_every_error_is_a_problem_and_every_route_is_in_it(tmp_path: Path) -> None:
    document, routes = _document(tmp_path)
    assert document["openapi"] == "3.1.0"
    assert "Problem" in document["components"]["schemas"]
    assert "HTTPValidationError" not in document["components"]["schemas"]
    operations = _operations(document)
    for path, method, operation in operations:
        errors = {s: r for s, r in operation["responses"].items() if s[0] in "45"}
        if path not in ("/healthz",):
            assert errors, f"{method} {path} declares no error"
        for status, response in errors.items():
            assert response["content"] == {
                PROBLEM_JSON: {"schema": {"$ref": "#/components/schemas/Problem"}}
            }, (path, method, status)
    ids = [operation["operationId"] for _, _, operation in operations]
    assert len(ids) == len(set(ids)), "operation ids must be unique"
    assert sorted(ids) == sorted(r.name for r in routes)  # each the route's name
    scoped = [(p, m, o) for p, m, o in operations if "{ns}" in p]
    assert all({"401", "403", "404", "422"} <= set(o["responses"]) for _, _, o in scoped)


def test_the_server_answers_the_document(served: Served, tmp_path: Path) -> None:
    with served.client() as anonymous:
        response = anonymous.get("/openapi.json")
    assert response.status_code == 200
    assert response.json() == json.loads(COMMITTED.read_text(encoding="utf-8"))
