"""schemathesis over the OpenAPI document a real ``memdir serve`` answers, on each store.

Every operation of ``/openapi.json`` gets generated requests, valid ones and invalid ones,
sent with an admin key of a test tenant, half of them on a namespace that exists (with a
memory, ``MEMORY.md`` and a session) and half on whatever name schemathesis makes up. Every
answer must be no server error, have a status the document declares, a declared content type
and a body that matches its schema. The examples are bounded and derandomized: the same
requests each run.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest

from _server import Served, serve_store

pytest.importorskip("schemathesis")
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

EXAMPLES = 30
"""Generated requests per operation, mode (valid or invalid) and namespace (existing or not)."""
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
NS = "acme.schema"
# An import's body is an archive: schemathesis sends the bytes it generates as they are.
schemathesis.serializer.alias("application/gzip", "application/octet-stream")


@pytest.fixture(scope="module", params=["files", "postgres"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    for served in serve_store(request, tmp_path_factory):
        with served.client("acme_admin") as client:  # something for the reads to read
            base = f"/v1/namespaces/{NS}"
            assert client.post(f"{base}/memories", json={"text": "a fact"}).status_code == 201
            message = {"role": "user", "content": "hi", "id": "m1"}
            sent = client.post(f"{base}/sessions/s1/messages", json={"messages": [message]})
            assert sent.status_code == 201
        yield served


def test_every_operation_answers_as_its_document_says(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    schema = schemathesis.openapi.from_url(f"{served.server.url}/openapi.json")
    session = requests.Session()
    session.headers.update(served.keys.headers("acme_admin"))
    existing = {"ns": NS, "session_id": "s1", "day": datetime.now().astimezone().date()}
    failures: dict[str, str] = {}
    statuses: Counter[int] = Counter()
    operations = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        operations += 1
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            for fixed in ({}, existing):
                params = {k: str(v) for k, v in fixed.items() if f"{{{k}}}" in operation.path}
                if fixed and not params:
                    continue
                strategy = operation.as_strategy(generation_mode=mode, path_parameters=params)

                @settings(
                    max_examples=EXAMPLES,
                    derandomize=True,
                    database=None,
                    deadline=None,
                    phases=[Phase.explicit, Phase.generate],
                    suppress_health_check=list(HealthCheck),
                )
                @given(case=strategy)
                def send(case: Any) -> None:
                    response = case.call(base_url=served.server.url, session=session, timeout=120)
                    statuses[response.status_code] += 1
                    case.validate_response(response, checks=CHECKS)

                where = f"{operation.label} {mode.value}{' (existing)' if params else ''}"
                try:
                    send()
                except Unsatisfiable:
                    continue  # nothing to make invalid in it (no parameter, no body)
                except Exception as exc:
                    failures[where] = str(exc)[:3000]
    assert not failures, "\n\n".join(f"{k}:\n{v}" for k, v in failures.items())
    assert operations >= 20
    summary = {"store": served.store, "operations": operations, "cases": sum(statuses.values()),
               "statuses": dict(sorted(statuses.items()))}  # fmt: skip
    with capsys.disabled():
        print(f"\nschemathesis: {json.dumps(summary)}")
