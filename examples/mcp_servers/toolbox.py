"""A small MCP server, written with the MCP SDK's FastMCP server API.

``python examples/mcp_servers/toolbox.py`` serves over stdio (what
``session.spawn_mcp("toolbox", command=[sys.executable, this_file])`` runs);
``python examples/mcp_servers/toolbox.py --http PORT`` serves streamable HTTP
on 127.0.0.1:PORT/mcp; ``--http 0`` lets the system choose a free port. Either
way, once it listens it prints one line on standard output, ``toolbox: serving
on http://127.0.0.1:PORT/mcp``, so a client reads the address rather than
guessing a free port (another process could take it first). It is used by
examples/mcp_tools.py, by pride's tests and by its benchmark, so each tool
shows one thing an MCP server can do.
"""

from __future__ import annotations

import argparse
import base64
import os
import socket
import sys

import anyio
from mcp.server.fastmcp import Context, FastMCP, Image
from mcp.server.fastmcp.exceptions import ToolError

server = FastMCP("toolbox", log_level="WARNING")  # no log line per request on stderr
cancelled_calls: list[str] = []

# A 1x1 transparent PNG, for the image tool.
PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="
)


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool()
def shout(text: str) -> str:
    """Return the text in capitals (plain text content, no structured output)."""
    return text.upper()


@server.tool()
async def slow(ctx: Context, seconds: float = 1.0, steps: int = 3, label: str = "slow") -> str:
    """Work for ``seconds``, reporting progress ``steps`` times; notes a cancellation."""
    try:
        for step in range(1, steps + 1):
            await anyio.sleep(seconds / steps)
            await ctx.report_progress(step, steps, f"step {step} of {steps}")
    except anyio.get_cancelled_exc_class():
        cancelled_calls.append(label)
        raise
    return f"{label} done"


meetings: dict[str, list[anyio.Event | int]] = {}


@server.tool()
async def meet(group: str, size: int = 2) -> str:
    """Return once ``size`` calls of ``group`` are running at the same time (10 s at most)."""
    event, arrived = meetings.setdefault(group, [anyio.Event(), 0])
    assert isinstance(event, anyio.Event) and isinstance(arrived, int)
    meetings[group][1] = arrived + 1
    if arrived + 1 >= size:
        event.set()
    with anyio.fail_after(10):
        await event.wait()
    return f"{group}: {size} met"


@server.tool()
def cancellations() -> list[str]:
    """Labels of the ``slow`` calls that were cancelled by their client."""
    return list(cancelled_calls)


@server.tool()
def fail(message: str) -> str:
    """Fail with ``message`` (an ``isError`` result)."""
    raise ToolError(message)


@server.tool()
def pid() -> int:
    """This server's process id."""
    return os.getpid()


@server.tool()
def crash(code: int = 3) -> str:
    """Exit the server process at once with ``code`` (a crash, seen by the client)."""
    sys.stderr.write(f"toolbox: crashing with exit code {code}\n")
    sys.stderr.flush()
    os._exit(code)


@server.tool()
def picture() -> Image:
    """A one-pixel PNG image."""
    return Image(data=PIXEL, format="png")


@server.tool()
async def grow(ctx: Context, name: str) -> str:
    """Add a tool called ``name`` (it echoes) and tell the client the list changed."""

    def added(text: str) -> str:
        return f"{name}: {text}"

    server.add_tool(added, name=name, description=f"Echo, as {name}.")
    await ctx.session.send_tool_list_changed()
    return f"added {name}"


def serve_http(port: int) -> None:
    """Serve streamable HTTP on 127.0.0.1:``port`` (0: a free one), announcing the address."""
    import uvicorn

    # The socket is bound and listening before the address is printed, so a
    # client that reads the line can connect at once (the backlog holds it
    # until uvicorn accepts).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    print(f"toolbox: serving on http://127.0.0.1:{sock.getsockname()[1]}/mcp", flush=True)
    config = uvicorn.Config(server.streamable_http_app(), log_level="warning")
    anyio.run(uvicorn.Server(config).serve, [sock])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--http", type=int, metavar="PORT", help="serve streamable HTTP (0: a free port)"
    )
    args = parser.parse_args()
    if args.http is None:
        server.run("stdio")
    else:
        serve_http(args.http)


if __name__ == "__main__":
    main()
