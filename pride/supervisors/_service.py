"""Services: supervised children that are neither branches nor sessions.

A service is a resource with a lifetime that a session owns the way it owns a
branch's actor: an MCP server connection (its subprocess or HTTP session) is
the first kind. The supervisor runs `Service.serve` in its nursery, so
the task that opens the resource is the task that closes it, applies the same
restart types, strategies and intensity as to branches, and stops services in
reverse start order on shutdown within the shared grace deadline.

The contract, from the supervisor's side:

* ``serve`` calls ``task_status.started()`` once the service is ready; an
  exception before that is a failed start (``spawn`` raises it).
* After ``started()``, an exception escaping ``serve`` is a crash (restarted
  by policy); returning is a deliberate, normal end.
* ``request_stop(deadline)`` asks the running ``serve`` to finish by the trio
  time ``deadline``; it may be called again with an earlier deadline. A service
  that overruns its deadline is cancelled, and must release what it holds in
  shielded, bounded cleanup (a subprocess is killed, never left behind).

A session's door to its MCP servers (``spawn_mcp``, ``mcp``) is here too, bound
onto [`Session`][pride.supervisors.session.Session] as its methods: the MCP
extra is imported on the first ``spawn_mcp`` only, so ``import pride`` never
loads the SDK.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable
from uuid import UUID

from ..errors import UnknownBranch
from .strategy import RestartType

__all__ = ["Service", "ServiceSession", "mcp", "spawn_mcp"]


@runtime_checkable
class Service(Protocol):
    """A supervised child with a lifetime (see the module docstring)."""

    @property
    def name(self) -> str:
        """The member name (unique among a session's members)."""
        ...

    @property
    def id(self) -> UUID:
        """A stable id, reported by lifecycle signals."""
        ...

    async def serve(self, *, task_status: Any = ...) -> str:
        """Run one incarnation until asked to stop; return the stop reason."""
        ...

    def request_stop(self, deadline: float) -> None:
        """Ask the running incarnation to end by the trio time ``deadline``."""
        ...


class ServiceSession(Protocol):
    """What the MCP door needs of a session (a [`Session`][pride.Session] is one)."""

    name: str

    @property
    def services(self) -> tuple[Service, ...]: ...

    async def spawn(self, member: Any, *, restart: Any = ...) -> Any: ...


async def spawn_mcp(
    session: ServiceSession,
    name: str,
    *,
    command: Sequence[str] | None = None,
    url: str | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    headers: Mapping[str, str] | None = None,
    restart: RestartType = "permanent",
    **options: Any,
) -> Any:
    """Start an MCP server as a supervised child and return its handle.

    Give ``command`` (an argv list: a stdio server, run as a subprocess
    with ``env`` added to a minimal inherited environment and ``cwd``)
    or ``url`` (a streamable-HTTP server; ``headers`` go with every
    request). Returns once the server has initialised and listed its
    tools; register them with ``branch.register_mcp(server, ...)``. The
    server restarts by ``restart`` and the session's strategy and
    intensity, like a branch. Needs the ``mcp`` extra; see
    `pride.mcp.spawn_mcp` (and docs/mcp.md) for ``options``.

    Raises:
        ImportError: the extra is not installed (``pip install 'pride[mcp]'``).
        pride.mcp.McpServerError: the server could not be started or initialised.
        ValueError: neither or both of ``command`` and ``url``, a bad
            option, or another member has the name.
        RuntimeError: this session is not running.
    """
    from ..mcp import spawn_mcp  # the optional extra: imported on first use only

    return await spawn_mcp(
        session,
        name,
        command=command,
        url=url,
        env=env,
        cwd=cwd,
        headers=headers,
        restart=restart,
        **options,
    )


def mcp(session: ServiceSession, name: str) -> Any:
    """The handle of the MCP server (a member service) called ``name``.

    Raises:
        UnknownBranch: no member service has that name (a ``LookupError``).
    """
    for service in session.services:
        if service.name == name:
            return service
    raise UnknownBranch(name, f"session {session.name!r} (MCP servers)")
