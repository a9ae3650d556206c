"""The JSON bodies of the REST API (pydantic models), one module per resource."""
