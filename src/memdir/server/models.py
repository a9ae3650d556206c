"""The model a server's jobs use (``memdir serve --model``), made fresh for each job.

A job runs on a thread of its own with its own event loop, so it gets a model of its own
(a hosted model's HTTP client belongs to the loop that made it). The spec is checked once when
the server starts, so a missing API key stops it there, in one line, not at the first flush.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from functools import partial

from memdir.errors import ConfigError
from memdir.models import ChatModel, model_from_string

__all__ = ["ModelFactory", "model_factory"]

ModelFactory = Callable[[], ChatModel]
"""Makes the model of one job."""

_PYTHON = "python:"


def model_factory(spec: str) -> ModelFactory:
    """What makes the model named by ``spec``: ``extractive``, ``provider:model`` (see
    :func:`memdir.models.model_from_string`), or ``python:MODULE:FUNCTION``, a function of an
    importable module that returns a :class:`~memdir.models.ChatModel` (a model of your own).

    Raises:
        ConfigError: the spec names no model that can be made (unknown provider, missing API
            key, a module or function that cannot be found).
    """
    if not spec.startswith(_PYTHON):
        model_from_string(spec)  # fails now, with the reason, if it cannot be made
        return partial(model_from_string, spec)
    module, _, name = spec.removeprefix(_PYTHON).partition(":")
    if not module or not name:
        raise ConfigError(f"--model {spec!r}: write python:MODULE:FUNCTION")
    try:
        factory = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"--model {spec!r}: cannot load it ({exc})") from None
    if not callable(factory):
        raise ConfigError(f"--model {spec!r}: {name} is not a function")
    made: ModelFactory = factory
    return made
