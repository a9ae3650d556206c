"""Fakes for tests: :class:`ScriptedModel`, :class:`FunctionModel` and :class:`ConceptEmbedder`.

Both implement :class:`~memdir.models.StreamingChatModel` (``stream()`` yields the answer's
text word by word, then each tool call, then the answer) and record every request as a
:class:`ModelCall`, so a test can script the answers and then assert on what was asked::

    model = ScriptedModel(["first answer", ContextOverflowError("too long"), "after retry"])
    ...
    model.assert_complete()
    assert model.calls[0].task == "summarize"
"""

from __future__ import annotations

import inspect
import json
import re
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from memdir.messages import Msg, ThinkingBlock, ToolUseBlock
from memdir.models._base import ModelResponse, ToolSpec, request_task
from memdir.models._stream import ModelDelta

__all__ = ["ConceptEmbedder", "FunctionModel", "ModelCall", "Reply", "ScriptedModel", "Step"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelCall:
    """One request a fake model received.

    Attributes:
        messages: the conversation as sent.
        tools: the tools offered, or ``None``.
        system: the ``system=`` argument, or ``None``.
        max_output_tokens: the ``max_output_tokens=`` argument, or ``None``.
    """

    messages: list[Msg]
    tools: list[ToolSpec] | None = None
    system: str | None = None
    max_output_tokens: int | None = None

    @property
    def task(self) -> str | None:
        """The memdir task marker of the request (``"summarize"``, ``"flush"``…), if any."""
        return request_task(self.messages)

    @property
    def last_user_text(self) -> str:
        """Text of the last user message (empty if there is none)."""
        for msg in reversed(self.messages):
            if msg.role == "user":
                return msg.text
        return ""


Reply: TypeAlias = str | Msg | ModelResponse
"""What a script step or a reply function may produce."""
Step: TypeAlias = (
    Reply | BaseException | type[BaseException] | Callable[[ModelCall], Reply | Awaitable[Reply]]
)
"""One scripted step: a reply, an exception to raise, or a function of the request."""


def _to_response(reply: Reply) -> ModelResponse:
    if isinstance(reply, ModelResponse):
        return reply
    if isinstance(reply, str):
        return ModelResponse(message=Msg.assistant(reply), stop_reason="stop")
    if isinstance(reply, Msg):
        if reply.role != "assistant":
            raise TypeError(f"a fake model reply must be an assistant message, not {reply.role!r}")
        stop = "tool_calls" if any(isinstance(b, ToolUseBlock) for b in reply.content) else "stop"
        return ModelResponse(message=reply, stop_reason=stop)
    raise TypeError(f"a fake model reply must be str, Msg or ModelResponse, not {reply!r}")


async def _resolve(fn: Callable[[ModelCall], Reply | Awaitable[Reply]], call: ModelCall) -> Reply:
    result = fn(call)
    if inspect.isawaitable(result):
        return await result
    return result


class _FakeModel:
    """What both fakes share: a name, a context window and the recorded calls."""

    def __init__(self, *, context_window: int | None, name: str) -> None:
        self.name = name
        self.context_window = context_window
        self.calls: list[ModelCall] = []

    async def generate(
        self,
        messages: Sequence[Msg],
        *,
        tools: Sequence[ToolSpec] | None = None,
        system: str | None = None,
        max_output_tokens: int | None = None,
    ) -> ModelResponse:
        """Record the call, then answer it (see the class docstring)."""
        call = ModelCall(
            messages=list(messages),
            tools=list(tools) if tools is not None else None,
            system=system,
            max_output_tokens=max_output_tokens,
        )
        self.calls.append(call)
        return await self._answer(call)

    async def stream(
        self,
        messages: Sequence[Msg],
        *,
        tools: Sequence[ToolSpec] | None = None,
        system: str | None = None,
        max_output_tokens: int | None = None,
    ) -> AsyncIterator[ModelDelta | ModelResponse]:
        """:meth:`generate`, streamed: thinking, text word by word, tool calls, the answer."""
        response = await self.generate(
            messages, tools=tools, system=system, max_output_tokens=max_output_tokens
        )
        for block in response.message.content:
            if isinstance(block, ThinkingBlock) and block.thinking:
                yield ModelDelta(kind="thinking", text=block.thinking)
        for piece in re.findall(r"\S*\s*", response.message.text):
            if piece:
                yield ModelDelta(kind="text", text=piece)
        for index, use in enumerate(response.message.tool_uses):
            yield ModelDelta(
                kind="tool_call",
                text=json.dumps(use.input, ensure_ascii=False),
                index=index,
                tool_call_id=use.id,
                tool_name=use.name,
            )
        yield response

    async def _answer(self, call: ModelCall) -> ModelResponse:
        raise NotImplementedError


class ScriptedModel(_FakeModel):
    """A model that plays back a queue of steps, one per call.

    Args:
        steps: replies (``str``, assistant ``Msg``, ``ModelResponse``), exceptions (instances or
            classes) to raise, or callables taking the :class:`ModelCall` and returning a reply
            (or an awaitable of one).
        context_window: what :attr:`context_window` reports.
        name: what :attr:`name` reports.

    A call with no step left raises ``AssertionError``; :meth:`assert_complete` checks that
    every step was used.
    """

    def __init__(
        self,
        steps: Iterable[Step] = (),
        *,
        context_window: int | None = None,
        name: str = "scripted",
    ) -> None:
        super().__init__(context_window=context_window, name=name)
        self._steps: deque[Step] = deque(steps)

    @property
    def remaining(self) -> int:
        """How many steps are still queued."""
        return len(self._steps)

    def add(self, *steps: Step) -> None:
        """Queue more steps."""
        self._steps.extend(steps)

    async def _answer(self, call: ModelCall) -> ModelResponse:
        if not self._steps:
            raise AssertionError(
                f"{self.name}: call #{len(self.calls)} has no scripted step left "
                f"(task={call.task!r}, last user text={call.last_user_text[:80]!r})"
            )
        step = self._steps.popleft()
        if isinstance(step, str | Msg | ModelResponse):
            return _to_response(step)
        if isinstance(step, BaseException):
            raise step
        if isinstance(step, type):
            raise step()
        return _to_response(await _resolve(step, call))

    def assert_complete(self) -> None:
        """Raise ``AssertionError`` if some scripted steps were never used."""
        if self._steps:
            raise AssertionError(
                f"{self.name}: {len(self._steps)} scripted step(s) unused after "
                f"{len(self.calls)} call(s)"
            )


class FunctionModel(_FakeModel):
    """A model whose every answer is computed by ``fn`` from the request.

    Args:
        fn: takes the :class:`ModelCall`, returns a reply (``str``, assistant ``Msg``,
            ``ModelResponse``) or an awaitable of one; exceptions propagate to the caller.
        context_window: what :attr:`context_window` reports.
        name: what :attr:`name` reports.
    """

    def __init__(
        self,
        fn: Callable[[ModelCall], Reply | Awaitable[Reply]],
        *,
        context_window: int | None = None,
        name: str = "function",
    ) -> None:
        super().__init__(context_window=context_window, name=name)
        self._fn = fn

    async def _answer(self, call: ModelCall) -> ModelResponse:
        return _to_response(await _resolve(self._fn, call))


class ConceptEmbedder:
    """A deterministic :class:`~memdir.embeddings.Embedder` for tests (needs numpy).

    Each concept is one dimension; a text's vector counts the concept's words found in it
    (case-insensitive substrings), so a test decides what "means the same"::

        embedder = ConceptEmbedder({"db": ["database", "数据库"], "move": ["migration", "迁移"]})

    ``documents`` lists every text given to :meth:`embed_documents`, in order.
    """

    def __init__(self, concepts: dict[str, Sequence[str]], *, name: str = "concepts") -> None:
        if not concepts:
            raise ValueError("ConceptEmbedder needs at least one concept")
        self.concepts = {key: [w.lower() for w in words] for key, words in concepts.items()}
        self.name = f"{name}-{len(self.concepts)}"
        self.dim = len(self.concepts)
        self.documents: list[str] = []
        self.queries: list[str] = []

    def _vector(self, text: str) -> list[float]:
        low = text.lower()
        return [float(sum(low.count(w) for w in words)) for words in self.concepts.values()]

    def embed_documents(self, texts: Sequence[str]) -> Any:
        """One row per text."""
        import numpy as np

        self.documents.extend(texts)
        return np.array([self._vector(t) for t in texts], dtype=np.float32).reshape(
            len(texts), self.dim
        )

    def embed_query(self, text: str) -> Any:
        """The vector of one query."""
        import numpy as np

        self.queries.append(text)
        return np.array(self._vector(text), dtype=np.float32)
