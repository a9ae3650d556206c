"""Provenance: where every bullet of memory came from, and how far it is trusted.

- Every ledger bullet written by a flush knows the session and the messages it was extracted
  from; one written by ``memdir add`` / ``memory_add`` says who added it.
- Every ``MEMORY.md`` bullet knows the ledger lines it was consolidated from: the
  consolidator is given source ids and must cite them; ids it invents are dropped, and a
  bullet left without a valid one is recorded as ``unsourced``.
- :func:`why` follows a bullet down to the conversation lines; :func:`sources_of` gives the
  citations a search hit or a read carries.
- :mod:`memdir.provenance._trust` quotes instructions planted by untrusted origins.

The records live in ``memory/.provenance/`` (see :mod:`memdir.provenance._records` and
``docs/provenance.md``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memdir._lazy import lazy_exports

if TYPE_CHECKING:
    from memdir.provenance._records import (
        MEMORY_RECORDS_REL,
        PROVENANCE_DIR,
        LedgerRecord,
        MemoryRecord,
        SourceRef,
        bullet_id,
    )
    from memdir.provenance._trust import ORIGINS, TRUSTED, escape_tags, guard, is_quoted, risk

__all__ = [
    "MEMORY_RECORDS_REL",
    "ORIGINS",
    "PROVENANCE_DIR",
    "TRUSTED",
    "LedgerRecord",
    "MemoryRecord",
    "SourceRef",
    "bullet_id",
    "escape_tags",
    "guard",
    "is_quoted",
    "risk",
]

_RECORDS = "memdir.provenance._records"
_TRUST = "memdir.provenance._trust"
_LAZY = {
    "MEMORY_RECORDS_REL": _RECORDS,
    "PROVENANCE_DIR": _RECORDS,
    "LedgerRecord": _RECORDS,
    "MemoryRecord": _RECORDS,
    "SourceRef": _RECORDS,
    "bullet_id": _RECORDS,
    "ORIGINS": _TRUST,
    "TRUSTED": _TRUST,
    "escape_tags": _TRUST,
    "guard": _TRUST,
    "is_quoted": _TRUST,
    "risk": _TRUST,
}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, __all__)
