"""Which ``Host`` and ``Origin`` a request to one of pride's HTTP servers may carry.

Both network doors, ``pride serve`` and ``pride mcp --http``, apply the one
rule here, before anything else of a request is read.

A page on another site can make a browser send requests to a server on
127.0.0.1 by rebinding its own host name to that address (DNS rebinding);
the request then carries the attacker's name in ``Host``. So ``Host`` must be
one of the server's own names (``127.0.0.1:PORT``, ``localhost:PORT``,
``[::1]:PORT`` for a loopback server, the bound address otherwise) or one
allowed with ``--allow-host`` (a proxy's public name); a request with another
is refused with 421 (Misdirected Request). A request with an ``Origin`` (sent
by browsers) must come from the server's own origin or one allowed with
``--allow-origin``, else 403; no ``Origin`` at all is a client that is not a
browser, and allowed. The MCP specification asks this of local MCP servers.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

__all__ = ["Guard"]

_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def _is_local(host: str) -> bool:
    if host in ("localhost", "", "0.0.0.0", "::"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


class Guard:
    """The Host and Origin checks of one server (see the module docstring).

    Args:
        host: the address the server is bound to.
        port: the port it got.
        allow_hosts: ``--allow-host`` values: ``NAME`` (any port) or
            ``NAME:PORT``; ``*`` allows every Host.
        allow_origins: ``--allow-origin`` values (``https://chat.example.com``);
            ``*`` allows every origin.
    """

    def __init__(
        self, host: str, port: int, allow_hosts: Sequence[str], allow_origins: Sequence[str]
    ) -> None:
        names = list(_LOOPBACK_NAMES) if _is_local(host) else [_bracketed(host)]
        own = {f"{name}:{port}" for name in names}
        if port == 80:
            own.update(names)
        self.any_host = "*" in allow_hosts
        self._hosts = {value.lower() for value in own}
        self._names: set[str] = set()  # allowed on any port
        for given in allow_hosts:
            value = given.strip().lower()
            if value == "*":
                continue
            name, colon, rest = value.rpartition(":")
            if colon and rest.isdigit() and not name.endswith(":"):
                self._hosts.add(value)
            else:
                self._names.add(value)
        self.any_origin = "*" in allow_origins
        self._own_origins = {f"http://{value}" for value in own}
        self._origins = {value.strip().rstrip("/").lower() for value in allow_origins} - {"*"}

    def host_allowed(self, value: bytes | None) -> bool:
        """True when a request's ``Host`` header names this server."""
        if self.any_host:
            return True
        if value is None:
            return False
        host = value.decode("latin-1").strip().lower()
        if host in self._hosts:
            return True
        name, colon, port = host.rpartition(":")
        if colon and port.isdigit() and "]" not in port:
            return name in self._names
        return host in self._names

    def origin_allowed(self, value: bytes | None) -> bool:
        """True when a request has no ``Origin`` or comes from an allowed one."""
        if value is None:
            return True
        origin = value.decode("latin-1").strip().rstrip("/").lower()
        if origin in self._own_origins:
            return True
        return self.any_origin or origin in self._origins

    def own_origin(self, value: bytes | None) -> bool:
        """True when a request carries an ``Origin`` naming this very server."""
        if value is None:
            return False
        return value.decode("latin-1").strip().rstrip("/").lower() in self._own_origins

    def cross_origin(self, value: bytes | None) -> bool:
        """True for an allowed ``Origin`` other than the server's own (CORS headers due)."""
        if value is None:
            return False
        origin = value.decode("latin-1").strip().rstrip("/").lower()
        return origin not in self._own_origins and self.origin_allowed(value)
