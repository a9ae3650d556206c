"""Small facts about network addresses that several commands need."""

from __future__ import annotations

import ipaddress

__all__ = ["is_loopback_host"]


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` (a name or an address to listen on) is this machine's loopback only:
    ``localhost``, ``127.0.0.0/8`` or ``::1``."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
