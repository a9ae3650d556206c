"""Plain Python functions as model tools: a JSON schema from the signature and the docstring.

``def search_web(query: str, limit: int = 5) -> str`` with a Google-style docstring becomes a
:class:`Tool` whose schema lists ``query`` (required, string) and ``limit`` (integer, default 5),
each described by its ``Args:`` entry. Parameters annotated
:class:`~memdir.store.workspace.Workspace` are not shown to the model: the agent passes its
workspace.

Running a tool never raises: bad arguments, exceptions and timeouts become ``is_error`` results
the model can act on. Sync functions run in a worker thread so the loop stays responsive.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import json
import logging
import re
import types
import typing
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Union, get_args, get_origin

from memdir.errors import ConfigError, MemdirError
from memdir.messages import ImageBlock, TextBlock, ToolResultBlock, ToolUseBlock
from memdir.models import ToolSpec
from memdir.store.workspace import Workspace

__all__ = ["Tool", "builtin_tools", "tool_from_function"]

logger = logging.getLogger("memdir.agent")

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Returns|Return|Raises|Yields|Examples?|Notes?):\s*$"
)
_ARG_LINE = re.compile(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")

ToolOutput = str | list[TextBlock | ImageBlock]


@dataclass(frozen=True, slots=True, kw_only=True)
class Tool:
    """A function the model may call.

    Attributes:
        name: the name the model uses.
        description: what the tool does, for the model.
        parameters: the JSON schema of the arguments.
        fn: the function; called with the model's arguments as keywords.
        inject: parameter names filled by the agent (e.g. the workspace), hidden from the model.
        error_prefix: output starting with this text is flagged as an error result
            (the memory tools report failures as ``Error: ...`` text).
    """

    name: str
    description: str
    parameters: dict[str, Any]
    fn: Callable[..., Any]
    inject: frozenset[str] = frozenset()
    error_prefix: str | None = None
    _is_async: bool = field(default=False, repr=False)

    @property
    def spec(self) -> ToolSpec:
        """The :class:`~memdir.models.ToolSpec` offered to the model."""
        return ToolSpec(name=self.name, description=self.description, parameters=self.parameters)

    async def run(
        self,
        call: ToolUseBlock,
        *,
        workspace: Workspace,
        timeout: float | None = None,
    ) -> ToolResultBlock:
        """Run the tool for ``call``; every failure becomes an ``is_error`` result."""
        try:
            kwargs = self._arguments(call.input)
        except _BadArguments as exc:
            return _error(call, f"Error: {exc}")
        for name in self.inject:
            kwargs[name] = workspace
        try:
            if self._is_async:
                pending: Awaitable[Any] = self.fn(**kwargs)
            else:
                pending = asyncio.to_thread(self.fn, **kwargs)
            value = await asyncio.wait_for(pending, timeout) if timeout else await pending
        except TimeoutError:
            return _error(call, f"Error: {self.name} did not finish within {timeout:g} s")
        except MemdirError as exc:
            return _error(call, f"Error: {exc}")
        except Exception as exc:
            # The model sees the error and may retry; the traceback is for the developer.
            logger.warning("tool %s raised %s", self.name, type(exc).__name__, exc_info=True)
            return _error(call, f"Error: {self.name} failed: {type(exc).__name__}: {exc}")
        output = _to_output(value)
        is_error = bool(
            self.error_prefix and isinstance(output, str) and output.startswith(self.error_prefix)
        )
        return ToolResultBlock(
            tool_use_id=call.id, name=self.name, output=output, is_error=is_error
        )

    def _arguments(self, given: Mapping[str, Any]) -> dict[str, Any]:
        props: Mapping[str, Any] = self.parameters.get("properties", {})
        unknown = sorted(set(given) - set(props))
        accepted = ", ".join(props) or "no arguments"
        if unknown:
            raise _BadArguments(
                f"{self.name} got unexpected argument(s) {', '.join(unknown)}; it takes {accepted}"
            )
        required = set(self.parameters.get("required", ()))
        missing = [k for k in self.parameters.get("required", ()) if k not in given]
        if missing:
            raise _BadArguments(
                f"{self.name} needs argument(s) {', '.join(missing)}; it takes {accepted}"
            )
        out: dict[str, Any] = {}
        for key, value in given.items():
            if value is None and key not in required:
                continue  # models send null for "use the default"
            out[key] = _coerce(self.name, key, value, props[key])
        return out


class _BadArguments(Exception):
    pass


def _error(call: ToolUseBlock, text: str) -> ToolResultBlock:
    return ToolResultBlock(tool_use_id=call.id, name=call.name, output=text, is_error=True)


def _to_output(value: object) -> ToolOutput:
    if value is None:
        return "(no output)"
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, TextBlock | ImageBlock):
        return [value]
    if (
        isinstance(value, list)
        and value
        and all(isinstance(v, TextBlock | ImageBlock) for v in value)
    ):
        return list(value)
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def _coerce(tool: str, name: str, value: object, schema: Mapping[str, Any]) -> object:
    """Accept what models commonly send ("5" for 5, 5.0 for 5, "true"); reject the rest."""
    kind = schema.get("type")
    if kind == "integer":
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str) and re.fullmatch(r"\s*[+-]?\d{1,18}\s*", value):
            return int(value)
    elif kind == "number":
        if isinstance(value, int | float) and not isinstance(value, bool):
            return value
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
    elif kind == "boolean":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in {"true", "false"}:
            return value.strip().lower() == "true"
    elif kind == "string":
        if isinstance(value, str):
            return value
    elif kind == "array":
        if isinstance(value, list):
            return value
    elif kind == "object":
        if isinstance(value, dict):
            return value
    else:
        return value
    raise _BadArguments(
        f"{tool}: argument {name!r} must be of type {kind} (got {type(value).__name__})"
    )


# -- schema from a function ---------------------------------------------------------------


def tool_from_function(
    fn: Callable[..., Any] | Tool,
    *,
    name: str | None = None,
    description: str | None = None,
    parameters: dict[str, Any] | None = None,
    error_prefix: str | None = None,
) -> Tool:
    """Describe ``fn`` as a tool.

    Args:
        fn: a sync or async function; its parameters become the tool's arguments.
        name: the tool name (default ``fn.__name__``).
        description: for the model (default: the docstring without its sections).
        parameters: an explicit JSON schema (default: derived from the signature).
        error_prefix: output starting with this text is flagged as an error.

    Raises:
        ConfigError: the name is not a valid tool name, or a parameter cannot be described
            (``*args``, or an annotation with no JSON form).
    """
    if isinstance(fn, Tool):
        return fn
    given: object = fn  # callers outside the type checker pass anything
    if not callable(given):
        raise ConfigError(f"a tool must be a function, not {type(given).__name__}")
    tool_name = str(name or getattr(fn, "__name__", ""))
    if not _NAME.match(tool_name):
        raise ConfigError(f"invalid tool name {tool_name!r}: use letters, digits, _ and -")
    doc = inspect.getdoc(fn) or ""
    summary, arg_docs = _parse_docstring(doc)
    schema, inject = _schema(fn, tool_name, arg_docs)
    return Tool(
        name=tool_name,
        description=str(description if description is not None else (summary or tool_name)),
        parameters=parameters if parameters is not None else schema,
        fn=fn,
        inject=frozenset(inject),
        error_prefix=error_prefix,
        _is_async=inspect.iscoroutinefunction(fn)
        or inspect.iscoroutinefunction(getattr(fn, "__call__", None)),  # noqa: B004
    )


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The summary (text before the first section) and the ``Args:`` entries."""
    summary: list[str] = []
    args: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    entry_indent: int | None = None
    for line in doc.splitlines():
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        heading = _SECTION.match(stripped)
        if heading and indent == 0:
            section = heading.group(1).lower()
            current, entry_indent = None, None
            continue
        if section is None:
            summary.append(line)
        elif section in {"args", "arguments", "parameters"} and stripped:
            match = _ARG_LINE.match(stripped)
            if match and (entry_indent is None or indent <= entry_indent):
                entry_indent = indent
                current = match.group(1).lstrip("*")
                args[current] = match.group(2).strip()
            elif current is not None:  # a continuation line, indented deeper
                args[current] = f"{args[current]} {stripped}".strip()
    return "\n".join(summary).strip(), args


def _schema(
    fn: Callable[..., Any], tool_name: str, arg_docs: Mapping[str, str]
) -> tuple[dict[str, Any], list[str]]:
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"tool {tool_name}: cannot read its signature ({exc})") from exc
    try:
        hints = typing.get_type_hints(fn)
    except Exception:
        hints = {}
    properties: dict[str, Any] = {}
    required: list[str] = []
    inject: list[str] = []
    for param in signature.parameters.values():
        if param.name in {"self", "cls"}:
            continue
        if param.kind is param.VAR_POSITIONAL:
            raise ConfigError(f"tool {tool_name}: *{param.name} cannot be given by a model")
        if param.kind is param.VAR_KEYWORD:
            continue
        hint = hints.get(param.name, Any)
        if _is_workspace(hint):
            inject.append(param.name)
            continue
        prop = _json_type(hint, tool_name, param.name)
        if param.name in arg_docs:
            prop["description"] = arg_docs[param.name]
        if param.default is param.empty:
            required.append(param.name)
        elif _json_safe(param.default):
            prop["default"] = param.default
        properties[param.name] = prop
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    return schema, inject


def _is_workspace(hint: object) -> bool:
    if hint is Workspace:
        return True
    return _is_union(hint) and any(a is Workspace for a in get_args(hint))


def _is_union(hint: object) -> bool:
    return get_origin(hint) in (Union, types.UnionType)


def _json_safe(value: object) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def _json_type(hint: object, tool: str, param: str) -> dict[str, Any]:
    simple: dict[object, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}
    if hint in simple:
        return {"type": simple[hint]}
    if hint is Any or hint is inspect.Parameter.empty:
        return {}
    if hint is type(None):
        return {"type": "null"}
    origin = get_origin(hint)
    args = get_args(hint)
    if _is_union(hint):
        options = [a for a in args if a is not type(None)]
        if len(options) == 1:
            return _json_type(options[0], tool, param)
        return {"anyOf": [_json_type(a, tool, param) for a in options]}
    if origin is Literal:
        return {"enum": list(args)}
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return {"enum": [m.value for m in hint]}
    if hint in (list, tuple, set, frozenset) or origin in (list, tuple, set, frozenset, Sequence):
        item = args[0] if args and args[0] is not Ellipsis else Any
        items = _json_type(item, tool, param)
        return {"type": "array", "items": items} if items else {"type": "array"}
    if hint is dict or origin in (dict, Mapping):
        return {"type": "object"}
    raise ConfigError(
        f"tool {tool}: parameter {param!r} has a type ({hint!r}) with no JSON form; "
        "use str, int, float, bool, list, dict, Literal or an Enum"
    )


def builtin_tools(*, memory: bool, files: bool) -> list[Tool]:
    """The memory and past-session tools (:mod:`memdir.tools`, same schemas as the MCP
    server) and file tools."""
    from memdir.agent._file_tools import FILE_TOOLS
    from memdir.tools import ALL_TOOL_FUNCTIONS, TOOL_DESCRIPTIONS, TOOL_SCHEMAS

    out: list[Tool] = []
    if memory:
        for name, fn in ALL_TOOL_FUNCTIONS.items():
            out.append(
                tool_from_function(
                    fn,
                    name=name,
                    description=TOOL_DESCRIPTIONS[name],
                    parameters=TOOL_SCHEMAS[name],
                    error_prefix="Error:",
                )
            )
    if files:
        out.extend(tool_from_function(fn) for fn in FILE_TOOLS)
    return out
