"""An MCP server's tool list, and the branches' registrations kept in step with it.

The server handle takes a tool list when an incarnation starts and again on
``notifications/tools/list_changed``; `ToolListing.install` checks each tool
(`pride.mcp._schema.check_tool`: a tool pride cannot offer is logged and left
out, the rest serve) and brings every registration (``branch.register_mcp``)
in step: tools added are registered, changed ones replaced, removed ones
unregistered. A registration holds its action manager weakly, so a branch
that is gone is forgotten.

A list can be long (thousands of tools) and each schema check costs a
millisecond, so the event loop never does them: they run in worker threads,
`CHECK_CHUNK` tools at a time (so a cancelled listing stops between chunks),
and a tool whose definition is unchanged since the last listing keeps its
check and its registered `McpTool`. What is left on the event loop, making
and registering the tools that changed, is linear in their number and yields
every `INSTALL_CHUNK` tools.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Iterable, Mapping
from typing import Any

import attrs
import pydantic
import trio
from mcp import ClientSession, types

from ..tools import ActionManager
from ._bounds import Unchecked
from ._errors import McpToolError, McpUnavailable
from ._schema import CheckedTool, check_tool, tool_key
from ._tool import McpTool, ToolServer, cut, local_name

__all__ = [
    "CHECK_CHUNK",
    "INSTALL_CHUNK",
    "MAX_TOOLS",
    "MAX_TOOL_PAGES",
    "ToolListing",
    "list_tools",
]

log = logging.getLogger("pride.mcp")

MAX_TOOL_PAGES = 100
"""Pages of ``tools/list`` followed; a server cannot page forever."""

MAX_TOOLS = 20_000
"""Tools taken from one listing; the rest are ignored (and a warning says so)."""

CHECK_CHUNK = 64
"""Tools checked per worker-thread job."""

INSTALL_CHUNK = 256
"""Tools made and registered between two checkpoints of the event loop."""

_Outcome = CheckedTool | str  # a tool pride offers, or why it does not


@attrs.define(eq=False)
class _Registration:
    """Tools of the server registered in one action manager."""

    acts: weakref.ref[ActionManager]
    owner: str
    prefix: str | None
    include: frozenset[str] | None
    exclude: frozenset[str]
    keys: dict[str, str] = attrs.field(factory=dict)  # pride name -> the tool's key
    names: dict[str, str] = attrs.field(factory=dict)  # server name -> pride name (a cache)


class ToolListing:
    """The tools one server offers (as last listed) and who registered them."""

    def __init__(self, server: ToolServer) -> None:
        self._server = server
        self._offered: dict[str, CheckedTool] = {}  # by server name, in listed order
        self._known: dict[str, _Outcome] = {}  # by key: the last listing's outcomes
        self._registrations: list[_Registration] = []
        self.listings = 0
        self.checked = 0  # tools checked (a listing of unchanged tools checks none)
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

    async def check_result(self, remote: str, result: types.CallToolResult) -> None:
        """Check a result of the tool ``remote`` against its output schema, as the SDK's
        ``call_tool`` would (pride's check is bounded: `pride.mcp._bounds`).

        Raises:
            McpToolError: the result does not match, has no ``structuredContent``,
                or could not be checked within the bounds.
        """
        checked = self._offered.get(remote)
        if checked is None or checked.output is None:
            return
        problem = None
        if result.structuredContent is None:
            problem = "has an output schema, but its result has no structuredContent"
        else:
            try:
                error = await checked.output.first_error(result.structuredContent)
            except Unchecked as exc:
                problem = (
                    f"could not be checked against its output schema within pride's bounds: {exc}"
                )
            else:
                if error is not None:
                    problem = f"does not match its output schema: {cut(error.message, 300)}"
        if problem is not None:
            raise McpToolError(
                f"MCP server {self._server.name!r}: the result of {remote!r} {problem}"
            )

    # ------------------------------------------------------------ a branch registers

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
                offers = ", ".join(self._offered)
                raise ValueError(
                    f"MCP server {server!r} has no tool {', '.join(map(repr, unknown))} "
                    f"(it offers: {_cut(offers, 2_000) or 'none'})"
                )
        chosen = self._chosen(registration)
        taken = [name for name in chosen if name in acts]
        if taken:
            raise ValueError(
                f"tool {taken[0]!r} is already registered on {owner or 'this branch'}; "
                "pass prefix=... to register the server's tools under other names"
            )
        tools = [McpTool(self._server, checked, name=name) for name, checked in chosen.items()]
        acts.register(tools)
        registration.keys = {name: checked.key for name, checked in chosen.items()}
        self._registrations.append(registration)
        return tuple(chosen)

    # ------------------------------------------------------------ the server lists

    async def install(self, listed: list[Any]) -> None:
        """Take a new tool list (``tools/list`` entries, unparsed) and bring every
        registration in step with it.

        Cancellation: nothing changes if cancelled while the tools are checked;
        cancelled later, registrations are left part-way, and the next listing
        completes them.
        """
        outcomes = await self._check(listed)
        offered: dict[str, CheckedTool] = {}
        for outcome in outcomes.values():
            if not isinstance(outcome, CheckedTool):
                continue
            name = outcome.tool.name
            if name in offered:
                log.warning(
                    "MCP server %r lists the tool %.100r twice; the first is kept",
                    self._server.name,
                    name,
                )
                continue
            offered[name] = outcome
        self._offered, self._known = offered, outcomes
        for registration in list(self._registrations):
            acts = registration.acts()
            if acts is None:
                self._registrations.remove(registration)
                continue
            await self._sync(registration, acts)
            del acts  # a branch that goes away meanwhile is not kept alive here
        self.listings += 1
        self._listed.set()
        self._listed = trio.Event()

    async def _check(self, listed: list[Any]) -> dict[str, _Outcome]:
        """Each listed tool's outcome by key: known ones kept, new ones checked in threads."""
        known = self._known  # replaced (never changed) on the event loop: safe to read in threads
        memo: dict[tuple[str, str], Any] = {}  # used by one thread at a time: chunks run in turn
        outcomes: dict[str, _Outcome] = {}
        for start in range(0, len(listed), CHECK_CHUNK):
            chunk = listed[start : start + CHECK_CHUNK]
            checked = await trio.to_thread.run_sync(self._check_chunk, chunk, known, memo)
            for raw, key, outcome, new in checked:
                if new and isinstance(outcome, str):
                    log.warning(
                        "MCP server %r: tool %.100r is not offered: %s",
                        self._server.name,
                        raw.get("name") if isinstance(raw, dict) else raw,
                        outcome,
                    )
                outcomes.setdefault(key, outcome)
        return outcomes

    def _check_chunk(
        self, chunk: list[Any], known: Mapping[str, _Outcome], memo: dict[tuple[str, str], Any]
    ) -> list[tuple[Any, str, _Outcome, bool]]:
        """Runs in a worker thread: ``(raw, key, outcome, newly checked)`` per tool."""
        results: list[tuple[Any, str, _Outcome, bool]] = []
        for index, raw in enumerate(chunk):
            try:
                key = tool_key(raw)
            except ValueError as exc:
                results.append((raw, f"unreadable {index} {id(raw)}", str(exc), True))
                continue
            outcome = known.get(key)
            if outcome is not None:
                results.append((raw, key, outcome, False))
                continue
            try:
                outcome = check_tool(raw, key, memo)
            except ValueError as exc:
                outcome = str(exc)
            except Exception as exc:  # nothing a server lists may end its listing
                outcome = f"it could not be checked ({type(exc).__name__}: {_cut(str(exc))})"
            self.checked += 1
            results.append((raw, key, outcome, True))
        return results

    def _chosen(self, registration: _Registration) -> dict[str, CheckedTool]:
        """The offered tools ``registration`` takes, by pride name."""
        chosen: dict[str, CheckedTool] = {}
        names, registration.names = registration.names, {}
        for remote, checked in self._offered.items():
            if registration.include is not None and remote not in registration.include:
                continue
            if remote in registration.exclude:
                continue
            name = names.get(remote)
            if name is None:
                name = local_name(registration.prefix, remote)
            registration.names[remote] = name
            if name in chosen:
                kept, left = chosen[name], checked
                if registration.keys.get(name) == checked.key:  # the one registered already
                    kept, left = checked, chosen[name]  # stays: a reordered list swaps nothing
                chosen[name] = kept
                log.warning(
                    "MCP server %r: tools %.100r and %.100r both become %r; "
                    "only %.100r is registered",
                    self._server.name,
                    kept.tool.name,
                    left.tool.name,
                    name,
                    kept.tool.name,
                )
                continue
            chosen[name] = checked
        return chosen

    async def _sync(self, registration: _Registration, acts: ActionManager) -> None:
        server = self._server
        chosen = self._chosen(registration)

        def ours(name: str) -> bool:
            current = acts.get(name)
            return isinstance(current, McpTool) and current.server is server

        for name in [name for name in registration.keys if name not in chosen]:
            del registration.keys[name]
            if ours(name):
                acts.unregister(name)
                log.info("MCP server %r: tool %r is gone; unregistered", server.name, name)
        changed: list[McpTool] = []
        for seen, (name, checked) in enumerate(chosen.items(), 1):
            if not seen % INSTALL_CHUNK:  # a long list is not gone through in one step
                acts.register(changed, update=True)
                changed = []
                await trio.lowlevel.checkpoint()
            if registration.keys.get(name) == checked.key and ours(name):
                continue  # the same tool as before, already registered
            if name in acts and not ours(name):
                log.warning(
                    "MCP server %r: new tool %r not registered on %s: the name is taken",
                    server.name,
                    name,
                    registration.owner or "a branch",
                )
                continue
            changed.append(McpTool(server, checked, name=name))
            registration.keys[name] = checked.key
        acts.register(changed, update=True)


class _Page(pydantic.BaseModel):
    """A ``tools/list`` result with its tools left unparsed (they are checked in threads)."""

    model_config = pydantic.ConfigDict(extra="allow")
    tools: list[Any] = pydantic.Field(default_factory=list)
    nextCursor: str | None = None  # the protocol's name


async def list_tools(session: ClientSession, server: str) -> list[Any]:
    """Every tool entry, unparsed, following ``nextCursor`` (`MAX_TOOL_PAGES`, `MAX_TOOLS`).

    Raises:
        mcp.shared.exceptions.McpError: the server answered with an error.
        pydantic.ValidationError: a page is not a ``tools/list`` result.
    """
    tools: list[Any] = []
    cursor: str | None = None
    for _ in range(MAX_TOOL_PAGES):
        request = types.ClientRequest(
            types.ListToolsRequest(params=types.PaginatedRequestParams(cursor=cursor))
        )
        page = await session.send_request(request, _Page)
        tools.extend(page.tools)
        if len(tools) > MAX_TOOLS:
            log.warning(
                "MCP server %r lists more than %d tools (MAX_TOOLS); the rest are ignored",
                server,
                MAX_TOOLS,
            )
            return tools[:MAX_TOOLS]
        cursor = page.nextCursor
        if not cursor:
            return tools
    log.warning(
        "MCP server %r: its tool list has more than %d pages (MAX_TOOL_PAGES); the rest is ignored",
        server,
        MAX_TOOL_PAGES,
    )
    return tools


def _names(what: str, names: Iterable[str]) -> list[str]:
    items = [names] if isinstance(names, str) else list(names)
    if not all(isinstance(name, str) for name in items):
        raise ValueError(f"{what} must be tool names (strings)")
    return items


def _cut(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[:limit] + "… (cut)"
