"""The plain-data request/response types of memdir.models refuse malformed values."""

from __future__ import annotations

from typing import Any

import pytest

from memdir.errors import ConfigError
from memdir.messages import MessageFormatError, Msg
from memdir.models import ModelResponse, ToolSpec, Usage, request_task


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: ModelResponse(message="hello"), "must be an assistant Msg"),
        (lambda: ModelResponse(message=Msg.user("hello")), "must be an assistant Msg"),
        (lambda: ModelResponse(message=Msg.assistant("x"), usage={"in": 1}), "must be a Usage"),
        (lambda: Usage(input_tokens="12"), "input_tokens must be a non-negative int"),
        (lambda: Usage(output_tokens=-1), "output_tokens must be a non-negative int"),
        (lambda: ToolSpec(name="", description="d", parameters={}), "name must be a non-empty"),
        (lambda: ToolSpec(name="f", description=None, parameters={}), "description"),
        (lambda: ToolSpec(name="f", description="d", parameters='{"type": "object"}'), "schema"),
    ],
)
def test_malformed_values_are_config_errors(make: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        make()


def test_well_formed_values_are_accepted() -> None:
    response = ModelResponse(message=Msg.assistant("hi"), usage=Usage(input_tokens=3))
    assert response.text == "hi"
    assert response.usage is not None and response.usage.total_tokens is None
    assert ToolSpec(name="f", description="", parameters={"type": "object"}).name == "f"


def test_request_task_needs_a_list_of_messages() -> None:
    with pytest.raises(MessageFormatError, match="takes a list"):
        request_task(None)  # type: ignore[arg-type]
    assert request_task([Msg.user("x", metadata={"memdir.task": "flush"})]) == "flush"
