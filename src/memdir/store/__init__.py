"""Where memory is kept: the workspace directory, its atomic writes and appends, the ledger.

- :mod:`memdir.store.workspace`: :class:`~memdir.store.workspace.Workspace`, the layout, path
  areas, atomic rewrites and locked appends;
- :mod:`memdir.store.ledger`: the daily ledger's block format and bullet normalisation;
- ``_safeopen`` (race-free, confined opening) and ``_fileio`` (fsync'd writes), private.
"""

from __future__ import annotations
