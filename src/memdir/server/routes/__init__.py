"""The routes of the REST API, one module per resource, each a
:class:`~memdir.server.policy.MemdirRouter`; handlers reach the store only through
:class:`~memdir.server.policy.Bound`."""
