"""Small facts about network addresses that several commands need."""

from __future__ import annotations

import ipaddress
from typing import Final

__all__ = ["REFUSED_HEADER", "is_loopback_host"]

REFUSED_HEADER: Final = "Memdir-Refused"
"""The header of a server's 403 ``path-refused`` answer saying why the store refused the
path (``outside``, ``area``, ``loop``, ``directory``, ``special``), as
:class:`~memdir.store._safeopen.PathRefused` has it."""


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` (a name or an address to listen on) is this machine's loopback only:
    ``localhost``, ``127.0.0.0/8`` or ``::1``."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
