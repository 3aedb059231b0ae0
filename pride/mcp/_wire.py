"""Reading one JSON-RPC message a server sent, for both transports.

Why not the SDK's ``JSONRPCMessage.model_validate_json``: pydantic's JSON
parser stops at 200 levels of nesting, so one tool whose schema nests deeper
made the whole ``tools/list`` answer unreadable, the list was never answered,
and the server "did not initialise"; and it is slow on a long list (0.34 s for
10,000 tools, where ``json`` takes a third of that). Here the text is parsed
with ``json`` (strict: no ``NaN`` or ``Infinity``; nesting up to the
interpreter's recursion limit), then validated as a message, whose results
stay plain data for the request that waits on them (a tool list is checked
tool by tool, `pride.mcp._schema`). A message of more than `THREAD_BYTES`
is read in a worker thread, so a 16 MiB answer does not hold the event loop.
"""

from __future__ import annotations

import json
from typing import Any

import pydantic
import trio
from mcp import types

__all__ = ["THREAD_BYTES", "Unreadable", "read_message"]

THREAD_BYTES = 256 * 1024
"""Messages larger than this are parsed in a worker thread."""


class Unreadable(Exception):
    """The data is not a JSON-RPC message (the message says why)."""


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


_DECODER = json.JSONDecoder(parse_constant=_constant)


def _read(data: bytes | str) -> types.JSONRPCMessage:
    try:
        text = data.decode("utf-8") if isinstance(data, bytes | bytearray) else data
        parsed = _DECODER.decode(text)
    except RecursionError:
        raise Unreadable("nested too deeply to read") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, NaN, a huge integer
        raise Unreadable(f"not JSON ({type(exc).__name__}: {str(exc)[:200]})") from None
    try:
        return types.JSONRPCMessage.model_validate(parsed)
    except pydantic.ValidationError as exc:
        raise Unreadable(f"not a JSON-RPC message ({exc.error_count()} problems)") from None
    except RecursionError:
        raise Unreadable("nested too deeply to read") from None


async def read_message(data: bytes | str) -> types.JSONRPCMessage:
    """The message ``data`` holds (in a worker thread when it is large).

    Raises:
        Unreadable: it is not JSON, or not a JSON-RPC message.
    """
    if len(data) > THREAD_BYTES:
        return await trio.to_thread.run_sync(_read, data)
    return _read(data)
