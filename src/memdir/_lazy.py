"""Names a package re-exports, loaded on first use (PEP 562), so that importing it is cheap."""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, where: Mapping[str, str], public: Iterable[str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A module ``__getattr__`` and ``__dir__`` for ``package``.

    Args:
        package: the package's ``__name__``.
        where: each re-exported name and the module it comes from.
        public: the package's ``__all__``.

    ``__getattr__`` imports the module of a re-exported name (caching the value in the
    package), or a sub-module of the package by its name (``memdir.tools``), and raises
    :class:`AttributeError` for anything else.
    """
    names = sorted(public)

    def __getattr__(name: str) -> Any:
        module = importlib.import_module(package)
        source = where.get(name)
        if source is not None:
            value = getattr(importlib.import_module(source), name)
        elif not name.startswith("_") and importlib.util.find_spec(f"{package}.{name}"):
            value = importlib.import_module(f"{package}.{name}")
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module.__dict__[name] = value
        return value

    def __dir__() -> list[str]:
        module = importlib.import_module(package)
        return sorted({*module.__dict__, *names})

    return __getattr__, __dir__
