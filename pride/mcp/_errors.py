"""The MCP errors, under `PrideError`.

```text
PrideError
├── McpError                     base of the errors below
│   ├── McpServerError           the server could not start, or its connection broke
│   ├── McpUnavailable           a call found the server not running (restarting, stopped)
│   └── McpBusy                  pride as an MCP server refused a call: every place was taken
└── ToolError
    └── McpToolError             the server answered a tool call with an error
```

Inside a turn none of them fails the turn: a tool call that raises becomes an
error ``ActionResponse`` the model reads. A broken connection is also a crash
of the server's supervised child, which its session restarts by policy.
"""

from __future__ import annotations

from ..errors import PrideError, ToolError

__all__ = ["McpBusy", "McpError", "McpServerError", "McpToolError", "McpUnavailable"]


class McpError(PrideError):
    """Something went wrong between pride and an MCP server."""


class McpServerError(McpError):
    """The MCP server could not be started or initialised, or its connection broke.

    The message names the server and says what happened (the command that
    could not run, the exit code and the last lines the server wrote to its
    stderr, the HTTP failure). After a start this is a crash of the server's
    child: its session restarts it by its restart type and intensity.
    """


class McpUnavailable(McpError):
    """A call found the MCP server not running: restarting after a crash, or stopped.

    Retry after the restart (``BranchStarted(restart=True)`` names the server).
    """


class McpBusy(McpError):
    """pride, serving MCP (`serve_mcp`), refused a call: ``max_concurrent`` calls were
    running and none ended within ``queue_wait`` seconds. Nothing was sent to the branch.

    The client reads it as an error result naming ``--max-concurrent``; retry shortly.
    """


class McpToolError(ToolError):
    """The MCP server answered a tool call with an error.

    Either a result with ``isError: true`` (the tool ran and failed; the
    message is its text) or a JSON-RPC error (the server refused the call).
    """
