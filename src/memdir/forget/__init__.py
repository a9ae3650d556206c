"""Forgetting: a fact erased from every place it lives, or a whole namespace (a user).

See ``docs/forget.md``. :func:`plan_forget` previews, :func:`apply_forget` erases (journaled:
a crash is completed by the next run or :func:`resume_erasures`), :func:`delete_namespace`
deletes a user's memory whole.
"""

from __future__ import annotations

from memdir.forget._guard import without_erased
from memdir.forget._keys import ERASED_REL, erased_keys, erasure_mark
from memdir.forget._namespace import NamespaceDeleted, delete_namespace, resume_namespace_deletes
from memdir.forget._plan import Place, Target
from memdir.forget._run import ForgetPlan, ForgetReport, apply_forget, plan_forget
from memdir.forget._run import resume_erasures as _resume_facts
from memdir.store.workspace import Workspace

__all__ = [
    "ERASED_REL",
    "ForgetPlan",
    "ForgetReport",
    "NamespaceDeleted",
    "Place",
    "Target",
    "apply_forget",
    "delete_namespace",
    "erased_keys",
    "erasure_mark",
    "plan_forget",
    "resume_erasures",
    "without_erased",
]


def resume_erasures(ws: Workspace) -> int:
    """Complete every erasure (fact or namespace) a crash interrupted; how many."""
    return resume_namespace_deletes(ws) + _resume_facts(ws)
