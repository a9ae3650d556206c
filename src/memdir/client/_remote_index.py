"""``RemoteIndex``: the search index of a workspace on a ``memdir serve`` server, which is the
server's own. Searches go to the server (which brings its index up to date first); the other
calls have nothing to do, since the server indexes what it stores."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from memdir.index import IndexStats, SearchHit
from memdir.store.ledger import line_at
from memdir.tools import MAX_RESULTS_CAP

if TYPE_CHECKING:
    from memdir.store.workspace import Workspace

__all__ = ["RemoteIndex"]

_NOTHING: Final = IndexStats(
    files_indexed=0, files_unchanged=0, files_removed=0, lines_indexed=0, seconds=0.0
)


class RemoteIndex:
    """The server's index of the remote workspace ``workspace`` (a
    :class:`~memdir.index.SearchIndex`)."""

    def __init__(self, workspace: Workspace) -> None:
        assert workspace.remote is not None
        self.workspace = workspace
        self._remote = workspace.remote

    def __repr__(self) -> str:
        return f"RemoteIndex({self.workspace.describe()!r})"

    def search(self, query: str, limit: int = 10) -> list[SearchHit]:
        """The server's hits for ``query``, best first (at most the server's 50)."""
        return self._remote.search(query, min(limit, MAX_RESULTS_CAP))

    def refresh(self) -> IndexStats:
        """Nothing to do: the server refreshes its index before every search."""
        return _NOTHING

    def index_file(self, rel: str) -> int:
        """Nothing to do: the server indexes the file before the next search."""
        return 0

    def index_appended(self, rel: str, offset: int) -> int:
        """The line of ``rel`` starting at byte ``offset`` (the server indexes the rest)."""
        return line_at(self.workspace, rel, offset)

    def close(self) -> None:
        """Nothing to close."""
