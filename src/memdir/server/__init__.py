"""``memdir serve``: one memory for many agents, over HTTP, with a key per tenant.

Install with ``pip install 'memdir[server]'``. The web framework is imported only by the
application modules; :mod:`memdir.server.auth` (keys) works without it.
"""

from __future__ import annotations
