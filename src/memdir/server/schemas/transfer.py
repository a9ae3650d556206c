"""Body of the import route."""

from __future__ import annotations

from pydantic import Field

from memdir.server.schemas.meta import FromLibrary

__all__ = ["Imported"]


class Imported(FromLibrary):
    """What an import wrote (as :class:`memdir.store.transfer.TransferReport`)."""

    files: int = Field(description="Files written.")
    unchanged: int = Field(description="Files that held the same bytes already.")
    conflicts: list[str] = Field(
        description="Files that hold something else, left as they were (?replace=true "
        "overwrites them), as <namespace>:<path>."
    )
    bytes: int = Field(description="Bytes written.")
