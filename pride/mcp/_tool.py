"""An MCP server's tool as an ordinary pride `Tool`.

The tool keeps the server's JSON schema as given (nothing is re-derived), is
offered to models like any other tool, and validates a call's arguments
against that schema before anything is sent, with ``jsonschema`` (the SDK's
own dependency) within pride's bounds (`pride.mcp._bounds`: the schema is the
server's and the arguments the model's, neither trusted). Its result maps to
the ``ActionResponse`` output like this:

* ``isError: true`` raises `McpToolError` with the result's text: the
  model sees an error response and can try again;
* ``structuredContent`` present: the output is that object;
* only text parts: the output is the text (parts joined by newlines);
* anything else (images, audio, embedded resources, resource links): the
  output is a list of parts, each a dict with a ``type``: ``{"type": "text",
  "text"}``, ``{"type": "image", "mime_type", "data"}`` (base64, as the
  server sent it), ``{"type": "audio", "mime_type", "data"}``, ``{"type":
  "resource", "uri", "mime_type", "text" | "blob"}``, ``{"type":
  "resource_link", "uri", "name", "description", "mime_type"}``.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from mcp import types

from ..errors import ToolArgumentError
from ..tools import Tool, report_progress
from ._bounds import Unchecked
from ._errors import McpToolError
from ._schema import CheckedTool

__all__ = [
    "MAX_DESCRIPTION",
    "MAX_ERROR_TEXT",
    "McpTool",
    "ToolServer",
    "cut",
    "local_name",
    "tool_output",
]

MAX_DESCRIPTION = 8_000
"""Characters of a server's tool description kept (a longer one is cut)."""

MAX_ERROR_TEXT = 8_000
"""Characters of a tool's error text shown to the model (a JSON-RPC error's too)."""

_INVALID = re.compile(r"[^a-zA-Z0-9_-]")


def local_name(prefix: str | None, remote: str) -> str:
    """The pride tool name for the server's tool ``remote``: ``prefix + remote``, made valid.

    Characters providers do not accept in a function name (``.``, ``/``,
    spaces) become ``_``; the name is cut at 64 characters.
    """
    return _INVALID.sub("_", f"{prefix or ''}{remote}")[:64]


class ToolServer(Protocol):
    """What a tool needs of its server (an `McpServer`): its name, and a call of its tool."""

    @property
    def name(self) -> str:
        """The server's name."""
        ...

    async def call_tool(
        self,
        tool: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        on_progress: Callable[..., Awaitable[Any]] | None = None,
    ) -> types.CallToolResult:
        """Call the server's tool ``tool`` and return the SDK's result."""
        ...


async def _forward() -> Any:  # the callable behind every McpTool; calls go through invoke
    raise NotImplementedError


# Every McpTool is made from this one: its callable's signature is read once, not per tool.
_TEMPLATE = Tool(_forward, name="mcp_tool")


class McpTool(Tool):
    """One tool of an MCP server, callable by models like any other pride tool.

    Made by `McpServer.register_with` (``branch.register_mcp``), not
    directly. ``name`` is the pride name (prefix included); ``remote_name``
    the server's. Calls go to the server's current incarnation, so a tool
    registered before a restart keeps working after it.
    """

    __slots__ = ("_checked", "_server")

    def __init__(self, server: ToolServer, checked: CheckedTool, *, name: str) -> None:
        remote = checked.tool
        description = (remote.description or remote.title or "").strip()
        if len(description) > MAX_DESCRIPTION:
            description = description[:MAX_DESCRIPTION] + "… (cut)"
        super().__init__(_TEMPLATE, name=name, description=description)
        self._server = server
        self._checked = checked

    @property
    def server(self) -> ToolServer:
        """The server this tool belongs to."""
        return self._server

    @property
    def remote_name(self) -> str:
        """The tool's name on the server."""
        return self._checked.tool.name

    @property
    def parameters(self) -> dict[str, Any]:
        """The server's input schema, as given (a fresh copy on every access)."""
        return copy.deepcopy(self._checked.input.schema)

    def schema(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "parameters": self.parameters}

    def validate(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Check ``arguments`` against the server's schema; return them as a dict.

        The check runs on the calling thread, within pride's bounds (on the
        keyword applications a check makes, how deeply they nest, and about a
        second of CPU time); `invoke` holds the event loop far less.

        Raises:
            ToolArgumentError: not a mapping, the first schema violation (its
                path in the arguments and what is wrong), or a check that could
                not be made within the bounds.
        """
        arguments = self._mapping(arguments)
        try:
            error = self._checked.input.first_error_now(arguments)
        except Unchecked as exc:
            raise self._unchecked(exc) from None
        self._raise_for(error)
        return arguments

    async def invoke(self, arguments: Mapping[str, Any] | None = None) -> Any:
        """Validate, call the tool on the server, and map its result (module docstring).

        Progress notifications of the call are reported with
        `report_progress` as they arrive.

        Raises:
            ToolArgumentError: the arguments do not match the schema, or could
                not be checked within the bounds; nothing was sent.
            McpToolError: the server answered with an error, or a result that
                does not match the tool's output schema.
            McpUnavailable: the server is not running.
            McpServerError: the connection broke during the call.

        Cancellation: the server is sent ``notifications/cancelled`` for the
        call, and the call has ended when the cancellation propagates.
        """
        checked = self._mapping({} if arguments is None else arguments)
        try:
            error = await self._checked.input.first_error(checked)
        except Unchecked as exc:
            raise self._unchecked(exc) from None
        self._raise_for(error)
        result = await self._server.call_tool(
            self.remote_name, checked, on_progress=report_progress
        )
        return tool_output(result)

    def _mapping(self, arguments: Any) -> dict[str, Any]:
        if not isinstance(arguments, Mapping):
            raise ToolArgumentError(
                f"tool {self.name!r} takes an object of arguments, got {type(arguments).__name__}"
            )
        return dict(arguments)

    def _unchecked(self, exc: Unchecked) -> ToolArgumentError:
        return ToolArgumentError(
            f"tool {self.name!r}: its arguments could not be checked against its schema "
            f"within pride's bounds: {exc}"
        )

    def _raise_for(self, error: Any) -> None:
        if error is not None:
            where = "/".join(str(part) for part in error.absolute_path) or "(the arguments)"
            raise ToolArgumentError(
                f"invalid arguments for tool {self.name!r} at {where}: {cut(error.message, 300)}"
            )

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the tool with keyword arguments (validated); returns a coroutine."""
        if args:
            raise TypeError(f"MCP tool {self.name!r} takes keyword arguments only")
        return self.invoke(kwargs)

    def __repr__(self) -> str:
        return f"McpTool(name={self.name!r}, server={self._server.name!r})"


def tool_output(result: types.CallToolResult) -> Any:
    """The ActionResponse output of a tool result (see the module docstring).

    Raises:
        McpToolError: ``isError`` is set.
    """
    if result.isError:
        texts = [part.text for part in result.content if isinstance(part, types.TextContent)]
        message = "\n".join(texts).strip() or "the tool reported an error (no text)"
        raise McpToolError(cut(message, MAX_ERROR_TEXT))
    if result.structuredContent is not None:
        return result.structuredContent
    parts = [_part(part) for part in result.content]
    if all(part["type"] == "text" for part in parts):
        return "\n".join(part["text"] for part in parts)
    return parts


def _part(part: Any) -> dict[str, Any]:
    if isinstance(part, types.TextContent):
        return {"type": "text", "text": part.text}
    if isinstance(part, types.ImageContent | types.AudioContent):
        return {"type": part.type, "mime_type": part.mimeType, "data": part.data}
    if isinstance(part, types.EmbeddedResource):
        resource = part.resource
        entry: dict[str, Any] = {
            "type": "resource",
            "uri": str(resource.uri),
            "mime_type": resource.mimeType,
        }
        if isinstance(resource, types.TextResourceContents):
            entry["text"] = resource.text
        else:
            entry["blob"] = resource.blob
        return entry
    if isinstance(part, types.ResourceLink):
        return {
            "type": "resource_link",
            "uri": str(part.uri),
            "name": part.name,
            "description": part.description,
            "mime_type": part.mimeType,
        }
    return {"type": str(getattr(part, "type", "unknown"))}


def cut(text: str, limit: int) -> str:
    """``text``, cut at ``limit`` characters (saying so)."""
    return text if len(text) <= limit else text[:limit] + "… (cut)"
