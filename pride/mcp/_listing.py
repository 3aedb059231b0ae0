"""An MCP server's tool list, and the branches' registrations kept in step with it.

The server handle takes a tool list when an incarnation starts and again on
``notifications/tools/list_changed``; `ToolListing.install` checks each
tool's schema (a tool pride cannot offer is logged and left out) and brings
every registration (``branch.register_mcp``) in step: tools added are
registered, changed ones replaced, removed ones unregistered. A registration
holds its action manager weakly, so a branch that is gone is forgotten.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import attrs
import trio
from mcp import ClientSession, types

from ..tools import ActionManager
from ._errors import McpUnavailable
from ._tool import McpTool, checked_schema, local_name

if TYPE_CHECKING:
    from ._server import McpServer

__all__ = ["MAX_TOOL_PAGES", "ToolListing", "list_tools"]

log = logging.getLogger("pride.mcp")

MAX_TOOL_PAGES = 100
"""Pages of ``tools/list`` followed; a server cannot page forever."""


@attrs.define(eq=False)
class _Registration:
    """Tools of the server registered in one action manager."""

    acts: weakref.ref[ActionManager]
    owner: str
    prefix: str | None
    include: frozenset[str] | None
    exclude: frozenset[str]
    names: dict[str, str] = attrs.field(factory=dict)  # pride name -> server name


class ToolListing:
    """The tools one server offers (as last listed) and who registered them."""

    def __init__(self, server: McpServer) -> None:
        self._server = server
        self._remote: dict[str, types.Tool] = {}
        self._offered: dict[str, dict[str, Any]] = {}  # server name -> checked schema
        self._registrations: list[_Registration] = []
        self.listings = 0
        self._listed = trio.Event()

    @property
    def names(self) -> tuple[str, ...]:
        """The tools pride can offer, by server name."""
        return tuple(self._offered)

    def __len__(self) -> int:
        return len(self._offered)

    async def wait(self, count: int) -> None:
        """Wait until the list has been taken at least ``count`` times."""
        while self.listings < count:
            await self._listed.wait()

    def register(
        self,
        acts: ActionManager,
        *,
        owner: str,
        prefix: str | None,
        include: Iterable[str] | None,
        exclude: Iterable[str] | None,
    ) -> tuple[str, ...]:
        """Register the offered tools in ``acts`` (see ``McpServer.register_with``)."""
        server = self._server.name
        if prefix is not None and not isinstance(prefix, str):
            raise ValueError(f"prefix must be a string, got {type(prefix).__name__}")
        if not self.listings:
            raise McpUnavailable(f"MCP server {server!r} has not started yet")
        wanted = None if include is None else frozenset(_names("include", include))
        registration = _Registration(
            weakref.ref(acts), owner, prefix, wanted, frozenset(_names("exclude", exclude or ()))
        )
        if wanted is not None:
            unknown = sorted(wanted - set(self._offered))
            if unknown:
                raise ValueError(
                    f"MCP server {server!r} has no tool {', '.join(map(repr, unknown))} "
                    f"(it offers: {', '.join(self._offered) or 'none'})"
                )
        tools = self._tools_for(registration)
        taken = [name for name in tools if name in acts]
        if taken:
            raise ValueError(
                f"tool {taken[0]!r} is already registered on {owner or 'this branch'}; "
                "pass prefix=... to register the server's tools under other names"
            )
        acts.register(list(tools.values()))
        registration.names = {name: tool.remote_name for name, tool in tools.items()}
        self._registrations.append(registration)
        return tuple(tools)

    def install(self, listed: list[types.Tool]) -> None:
        """Take a new tool list and bring every registration in step with it."""
        remote: dict[str, types.Tool] = {}
        offered: dict[str, dict[str, Any]] = {}
        for tool in listed:
            try:
                offered[tool.name] = checked_schema(tool)
            except ValueError as exc:
                log.warning(
                    "MCP server %r: tool %r is not offered: %s", self._server.name, tool.name, exc
                )
                continue
            remote[tool.name] = tool
        self._remote, self._offered = remote, offered
        for registration in list(self._registrations):
            acts = registration.acts()
            if acts is None:
                self._registrations.remove(registration)
                continue
            self._sync(registration, acts)
        self.listings += 1
        self._listed.set()
        self._listed = trio.Event()

    def _tools_for(self, registration: _Registration) -> dict[str, McpTool]:
        tools: dict[str, McpTool] = {}
        for remote, schema in self._offered.items():
            if registration.include is not None and remote not in registration.include:
                continue
            if remote in registration.exclude:
                continue
            name = local_name(registration.prefix, remote)
            if name in tools:
                log.warning(
                    "MCP server %r: tools %r and %r both become %r; only the first is registered",
                    self._server.name,
                    tools[name].remote_name,
                    remote,
                    name,
                )
                continue
            tools[name] = McpTool(self._server, self._remote[remote], schema, name=name)
        return tools

    def _sync(self, registration: _Registration, acts: ActionManager) -> None:
        server = self._server
        tools = self._tools_for(registration)
        for name in list(registration.names):
            current = acts.get(name)
            if name not in tools and isinstance(current, McpTool) and current.server is server:
                acts.unregister(name)
                log.info("MCP server %r: tool %r is gone; unregistered", server.name, name)
            if name not in tools:
                del registration.names[name]
        for name, tool in tools.items():
            current = acts.get(name)
            if current is not None and not (
                isinstance(current, McpTool) and current.server is server
            ):
                log.warning(
                    "MCP server %r: new tool %r not registered on %s: the name is taken",
                    server.name,
                    name,
                    registration.owner or "a branch",
                )
                continue
            acts.register(tool, update=True)
            registration.names[name] = tool.remote_name


async def list_tools(session: ClientSession) -> list[types.Tool]:
    """Every tool, following ``nextCursor`` (at most `MAX_TOOL_PAGES` pages)."""
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(MAX_TOOL_PAGES):
        page = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor))
        tools.extend(page.tools)
        cursor = page.nextCursor
        if not cursor:
            return tools
    log.warning(
        "MCP server's tool list has more than %d pages; the rest is ignored", MAX_TOOL_PAGES
    )
    return tools


def _names(what: str, names: Iterable[str]) -> list[str]:
    items = [names] if isinstance(names, str) else list(names)
    if not all(isinstance(name, str) for name in items):
        raise ValueError(f"{what} must be tool names (strings)")
    return items
