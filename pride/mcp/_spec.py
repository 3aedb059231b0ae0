"""What to connect to: one MCP server's command or URL, and its limits."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import attrs

__all__ = [
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_INIT_TIMEOUT",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "DEFAULT_RESTART_WAIT",
    "McpServerSpec",
]

DEFAULT_INIT_TIMEOUT = 30.0
"""Seconds a server gets to start, initialise and list its tools."""

DEFAULT_CALL_TIMEOUT: float | None = None
"""Seconds one tool call may take; None: no limit of its own (the turn's cancellation bounds it)."""

DEFAULT_RESTART_WAIT = 10.0
"""Seconds a call that finds its server restarting after a crash waits for it."""

DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024
"""The largest JSON-RPC message taken from a server (a stdio line; an HTTP body, SSE line or
SSE event); a longer one breaks the connection."""


def _command(value: Any) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise ValueError(
            f"command must be an argv list such as ['python', 'server.py'], got {value!r}"
        )
    argv = tuple(value)
    if not argv or not all(isinstance(part, str) and part for part in argv):
        raise ValueError(f"command must be a non-empty list of non-empty strings, got {value!r}")
    return argv


def _strings(what: str, value: Any) -> Mapping[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ValueError(f"{what} must map strings to strings")
    return dict(value)


def _env(value: Any) -> Mapping[str, str] | None:
    return _strings("env", value)


def _headers(value: Any) -> Mapping[str, str] | None:
    return _strings("headers", value)


def _cwd(value: Any) -> str | None:
    return None if value is None else str(Path(value))


def _seconds(what: str, value: Any) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ValueError(f"{what} must be a positive number of seconds, got {value!r}")
    return float(value)


def _init_timeout(value: Any) -> float:
    return _seconds("init_timeout", value)


def _call_timeout(value: Any) -> float | None:
    return None if value is None else _seconds("call_timeout", value)


def _restart_wait(value: Any) -> float:
    return _seconds("restart_wait", value)


@attrs.frozen(kw_only=True)
class McpServerSpec:
    """How to reach one MCP server: a stdio ``command`` or a streamable-HTTP ``url``.

    Attributes:
        name: the member name in its session (also the logger's label).
        command: argv of a stdio server, run as a subprocess in its own
            process group.
        url: the endpoint of a streamable-HTTP server (``http`` or ``https``).
        env: variables added to the subprocess's minimal inherited
            environment (the SDK's safe default: ``HOME``, ``PATH``, ``USER``
            and the like, never the parent's API keys).
        cwd: the subprocess's working directory.
        headers: sent with every HTTP request (say ``Authorization``); never
            shown in ``repr``, logs or errors.
        init_timeout: seconds to start, initialise and list the tools.
        call_timeout: seconds one tool call may take, the write of its request
            included (None: no own limit).
        restart_wait: seconds a call that finds the server restarting after a
            crash waits for it before failing with ``McpUnavailable``.
        max_message_bytes: the largest message accepted from the server (a
            stdio line; over HTTP a body, an SSE line or an SSE event).

    Raises:
        ValueError: neither or both of ``command`` and ``url``; a bad value.
    """

    name: str = attrs.field()
    command: tuple[str, ...] | None = attrs.field(default=None, converter=_command)
    url: str | None = None
    env: Mapping[str, str] | None = attrs.field(default=None, converter=_env)
    cwd: str | None = attrs.field(default=None, converter=_cwd)
    headers: Mapping[str, str] | None = attrs.field(default=None, converter=_headers, repr=False)
    init_timeout: float = attrs.field(default=DEFAULT_INIT_TIMEOUT, converter=_init_timeout)
    call_timeout: float | None = attrs.field(default=DEFAULT_CALL_TIMEOUT, converter=_call_timeout)
    restart_wait: float = attrs.field(default=DEFAULT_RESTART_WAIT, converter=_restart_wait)
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES

    @name.validator
    def _check_name(self, _: Any, value: Any) -> None:
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"an MCP server needs a non-empty name, got {value!r}")

    def __attrs_post_init__(self) -> None:
        if (self.command is None) == (self.url is None):
            raise ValueError(
                f"MCP server {self.name!r}: give exactly one of command=[...] (stdio) "
                "or url=... (streamable HTTP)"
            )
        if self.url is not None:
            parts = urlsplit(self.url) if isinstance(self.url, str) else None
            if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(
                    f"MCP server {self.name!r}: url must be an http(s) URL, got {self.url!r}"
                )
            if self.env is not None or self.cwd is not None:
                raise ValueError(f"MCP server {self.name!r}: env and cwd are for stdio servers")
        elif self.headers is not None:
            raise ValueError(f"MCP server {self.name!r}: headers are for HTTP servers")
        if (
            isinstance(self.max_message_bytes, bool)
            or not isinstance(self.max_message_bytes, int)
            or self.max_message_bytes < 1024
        ):
            raise ValueError(
                f"max_message_bytes must be an int >= 1024, got {self.max_message_bytes!r}"
            )

    @property
    def transport(self) -> str:
        """``"stdio"`` or ``"http"``."""
        return "stdio" if self.command is not None else "http"
