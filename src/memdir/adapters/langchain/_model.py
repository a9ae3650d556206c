"""A LangChain chat model serving memdir's own requests (compaction summaries, memory flush)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from typing import Any

from langchain_core.exceptions import ContextOverflowError as LangChainOverflow
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage

from memdir.adapters.langchain._convert import MEMDIR_KWARG, message_to_msg, to_langchain
from memdir.compaction import is_context_overflow
from memdir.errors import ConfigError, ContextOverflowError, ModelError
from memdir.messages import Msg
from memdir.models import (
    ChatModel,
    ExtractiveModel,
    ModelResponse,
    ToolSpec,
    Usage,
    model_from_string,
)

__all__ = ["LangChainChatModel", "memdir_model"]


class LangChainChatModel:
    """Any LangChain ``BaseChatModel`` behind memdir's :class:`~memdir.models.ChatModel` protocol.

    memdir's compactor and memory flush call it with plain text requests. The model's
    synchronous ``invoke`` runs in a worker thread: memdir's work may run on another event loop
    than the agent's, and a provider's async HTTP client must not be shared between loops.

    Args:
        model: the chat model (``ChatOpenAI(...)``, ``init_chat_model("...")``, a fake).
        context_window: its context size in tokens; default: ``max_input_tokens`` of the
            model's profile, when LangChain knows it.

    Raises:
        ConfigError: ``model`` is not a LangChain chat model.
    """

    def __init__(self, model: BaseChatModel, *, context_window: int | None = None) -> None:
        if not isinstance(model, BaseChatModel):
            raise ConfigError(
                f"LangChainChatModel needs a LangChain chat model, not {type(model).__name__}"
            )
        self.model = model
        self.name = f"langchain:{model._llm_type}"
        if context_window is None:
            profile: Any = getattr(model, "profile", None) or {}
            window = profile.get("max_input_tokens") if isinstance(profile, dict) else None
            context_window = window if isinstance(window, int) and window > 0 else None
        self.context_window: int | None = context_window

    def __repr__(self) -> str:
        return f"LangChainChatModel({self.name!r})"

    async def generate(
        self,
        messages: Sequence[Msg],
        *,
        tools: Sequence[ToolSpec] | None = None,
        system: str | None = None,
        max_output_tokens: int | None = None,
    ) -> ModelResponse:
        """Answer ``messages`` with the LangChain model (see :class:`~memdir.models.ChatModel`).

        ``max_output_tokens`` is not passed on: chat model classes name that setting
        differently; configure it on the model.

        Raises:
            ContextOverflowError: the provider said the request is too long.
            ModelError: any other failure of the model.
        """
        # memdir's task markers stay in memdir: the model gets the text of each message.
        plain = [dataclasses.replace(m, metadata={}) for m in messages]
        request: list[BaseMessage] = [SystemMessage(system)] if system else []
        for message in to_langchain(plain):
            message.additional_kwargs.pop(MEMDIR_KWARG, None)
            request.append(message)
        runnable: Any = self.model
        if tools:
            runnable = self.model.bind_tools(
                [
                    {
                        "type": "function",
                        "function": {
                            "name": t.name,
                            "description": t.description,
                            "parameters": t.parameters,
                        },
                    }
                    for t in tools
                ]
            )
        try:
            answer = await asyncio.to_thread(runnable.invoke, request)
        except Exception as exc:
            if isinstance(exc, LangChainOverflow) or is_context_overflow(exc):
                raise ContextOverflowError(f"{self.name}: the request is too long: {exc}") from exc
            raise ModelError(f"{self.name} failed: {type(exc).__name__}: {exc}") from exc
        if not isinstance(answer, AIMessage):
            raise ModelError(f"{self.name} answered with a {type(answer).__name__}, not a message")
        msg = message_to_msg(answer)
        usage = answer.usage_metadata
        return ModelResponse(
            message=dataclasses.replace(msg, metadata={}),
            usage=Usage(input_tokens=usage["input_tokens"], output_tokens=usage["output_tokens"])
            if usage
            else None,
            stop_reason=_stop_reason(answer),
        )


def _stop_reason(answer: AIMessage) -> str | None:
    meta = answer.response_metadata or {}
    for key in ("finish_reason", "stop_reason"):
        value = meta.get(key)
        if isinstance(value, str):
            return value
    return None


def memdir_model(model: object) -> ChatModel:
    """The memdir model of ``model``: a LangChain chat model (wrapped), a memdir
    :class:`~memdir.models.ChatModel`, a name, or ``None`` (the offline extractive model).

    Raises:
        ConfigError: anything else.
    """
    if model is None:
        return ExtractiveModel()
    if isinstance(model, BaseChatModel):
        return LangChainChatModel(model)
    if isinstance(model, str):
        return model_from_string(model)
    if isinstance(model, ChatModel):
        return model
    raise ConfigError(
        "model must be a LangChain chat model, a memdir ChatModel, a model name or None, "
        f"not {type(model).__name__}"
    )
