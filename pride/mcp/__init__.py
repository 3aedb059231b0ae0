"""MCP: tool servers as supervised children, and pride's branches served over MCP.

Needs the ``mcp`` extra (``pip install 'pride[mcp]'``). ``import pride``
never imports this package; ``session.spawn_mcp(...)`` does, on first use.

* `spawn_mcp` (``session.spawn_mcp``) starts an MCP server, over stdio
  (a subprocess) or streamable HTTP, as a supervised child of a session and
  returns its `McpServer` handle; ``branch.register_mcp(server, ...)``
  registers its tools as ordinary pride tools (`McpTool`).
* `serve_mcp` (``pride mcp APP --expose NAME...``) serves a session's
  branches to MCP clients.

See docs/mcp.md.
"""

from __future__ import annotations

try:
    import mcp as _sdk  # noqa: F401  (the optional extra; fail here with the fix)
except ImportError as exc:  # pragma: no cover - exercised in a subprocess by the tests
    raise ImportError("pride's MCP support needs the MCP SDK: pip install 'pride[mcp]'") from exc

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

from .._public import publish as _publish
from ._errors import (
    McpBusy as McpBusy,
    McpError as McpError,
    McpServerError as McpServerError,
    McpToolError as McpToolError,
    McpUnavailable as McpUnavailable,
)
from ._serve import build_server as build_server, serve_mcp as serve_mcp
from ._server import McpServer as McpServer
from ._spec import McpServerSpec as McpServerSpec
from ._statistics import McpServerStatistics as McpServerStatistics
from ._taps import MAX_CONTENT_BLOCKS as MAX_CONTENT_BLOCKS
from ._tool import McpTool as McpTool, tool_output as tool_output


class Supervisor(Protocol):
    """What `spawn_mcp` needs of a session: to supervise a child (``Session.spawn``).

    A protocol rather than the Session class: this package sits below the
    supervisors and never imports them, not even for type checking.
    """

    async def spawn(self, member: Any, *, restart: Any = ...) -> Any: ...


__all__ = [
    "MAX_CONTENT_BLOCKS",
    "McpBusy",
    "McpError",
    "McpServer",
    "McpServerError",
    "McpServerSpec",
    "McpServerStatistics",
    "McpTool",
    "McpToolError",
    "McpUnavailable",
    "Supervisor",
    "spawn_mcp",
    "tool_output",
]


async def spawn_mcp(
    session: Supervisor,
    name: str,
    *,
    command: Sequence[str] | None = None,
    url: str | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    headers: Mapping[str, str] | None = None,
    restart: Literal["permanent", "transient", "temporary"] = "permanent",
    **options: Any,
) -> McpServer:
    """Start an MCP server under ``session`` and return its handle (``session.spawn_mcp``).

    Args:
        session: the supervising session (running).
        name: the server's member name.
        command: argv of a stdio server (a subprocess in its own process group).
        url: the endpoint of a streamable-HTTP server.
        env: variables added to the subprocess's minimal environment.
        cwd: the subprocess's working directory.
        headers: HTTP headers sent with every request (secret-safe: never logged).
        restart: ``"permanent"``, ``"transient"`` or ``"temporary"``.
        **options: ``init_timeout`` (seconds, default 30), ``call_timeout``
            (seconds per call, the write of its request included; default
            none), ``restart_wait`` (seconds a call waits for a restart after
            a crash, default 10), ``max_message_bytes`` (the largest message
            taken from the server, default 16 MiB).

    Returns:
        The handle, once the server has initialised and listed its tools.

    Raises:
        McpServerError: it could not be started or did not initialise in time.
        ValueError: a bad argument, or the session has a member of that name.
        RuntimeError: the session is not running.
    """
    spec = McpServerSpec(
        name=name, command=command, url=url, env=env, cwd=cwd, headers=headers, **options
    )
    server = McpServer(spec, restart=restart)
    await session.spawn(server, restart=restart)
    return server


# Tracebacks, reprs and pickles name the public home of each class and function.
_publish(globals(), __all__, __name__)
