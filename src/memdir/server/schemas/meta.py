"""Bodies of the health probes, ``/v1/whoami`` and ``/v1/namespaces``."""

from __future__ import annotations

from datetime import datetime
from typing import Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["FromLibrary", "Health", "NamespaceDeleted", "NamespaceInfo", "Page", "WhoAmI"]

_T = TypeVar("_T")


class FromLibrary(BaseModel):
    """A body made from the library's result of the same fields (``model_validate(result)``)."""

    model_config = ConfigDict(from_attributes=True)


class Page(BaseModel, Generic[_T]):
    """One page of a list."""

    items: list[_T]
    next_cursor: str | None = Field(
        description="Pass as ?cursor= for the next page; null: the last."
    )


class Health(BaseModel):
    """A probe's answer."""

    status: Literal["ok"]


class WhoAmI(BaseModel):
    """The caller, as its key says."""

    tenant: str
    key_id: str
    scope: Literal["read", "write", "admin"]
    namespace_prefix: str = Field(description="The key reaches the namespaces starting with this.")
    namespace: str | None = Field(description="When set, the one namespace the key reaches.")
    expires_at: datetime | None


class NamespaceInfo(BaseModel):
    """A namespace the key reaches."""

    name: str


class NamespaceDeleted(BaseModel):
    """A namespace deleted whole: how many files it held, how many keys bound to it were
    revoked."""

    name: str
    files: int
    keys_revoked: int
