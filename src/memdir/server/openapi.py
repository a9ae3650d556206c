"""The OpenAPI 3.1 document of the server, generated from its routes.

FastAPI writes the document from the code; :func:`build_openapi` then declares every error
answer as what the server sends: ``application/problem+json`` with the :class:`Problem` schema
(FastAPI's own validation-error schema is never sent). Operation ids are the route names, so
they stay the same from one version to the next. The server answers it at ``/openapi.json``;
``docs/openapi.json`` is a copy, made by::

    python -m memdir.server.openapi > docs/openapi.json

and a test fails when the copy differs from what the code makes.
"""

from __future__ import annotations

import copy
import json
import sys
import tempfile
from typing import Any, Final

from fastapi import FastAPI

from memdir.server.problems import PROBLEM_JSON

__all__ = ["build_openapi", "install_openapi", "main", "render"]

_PROBLEM_REF: Final = {"$ref": "#/components/schemas/Problem"}
_FASTAPI_ONLY: Final = ("HTTPValidationError", "ValidationError")


def build_openapi(app: FastAPI) -> dict[str, Any]:
    """The OpenAPI document of ``app``, every error answer a problem."""
    document = copy.deepcopy(FastAPI.openapi(app))
    for item in document.get("paths", {}).values():
        for operation in item.values():
            for status, response in operation.get("responses", {}).items():
                if _is_error(status):
                    response["content"] = {PROBLEM_JSON: {"schema": dict(_PROBLEM_REF)}}
    schemas = document.get("components", {}).get("schemas", {})
    text = json.dumps(document.get("paths", {}))
    for name in _FASTAPI_ONLY:
        if f'"#/components/schemas/{name}"' not in text:
            schemas.pop(name, None)
    return document


def _is_error(status: str) -> bool:
    return status[:1] in ("4", "5") or status == "default"


def install_openapi(app: FastAPI) -> None:
    """Serve :func:`build_openapi` of ``app`` at its ``openapi_url`` (made once)."""
    made: dict[str, Any] = {}

    def openapi() -> dict[str, Any]:
        if not made:
            made.update(build_openapi(app))
        return made

    setattr(app, "openapi", openapi)  # noqa: B010 (an attribute mypy sees as a method)


def render(document: dict[str, Any]) -> str:
    """The document as ``docs/openapi.json`` holds it."""
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def main() -> None:
    """Print the document of a server with the default settings (over a scratch directory)."""
    from memdir.server.app import create_app
    from memdir.server.settings import ServerSettings

    with tempfile.TemporaryDirectory(prefix="memdir-openapi-") as scratch:
        app = create_app(ServerSettings(workspace=scratch))
        sys.stdout.write(render(build_openapi(app)))


if __name__ == "__main__":
    main()
