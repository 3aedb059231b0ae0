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

What a session's door to its MCP servers does
([`Session.spawn_mcp`][pride.supervisors.session.Session.spawn_mcp],
``Session.mcp``) is here too: the MCP extra is imported on the first
``spawn_mcp`` only, so ``import pride`` never loads the SDK.
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
    """[`Session.spawn_mcp`][pride.supervisors.session.Session.spawn_mcp]."""
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
    """[`Session.mcp`][pride.supervisors.session.Session.mcp]."""
    for service in session.services:
        if service.name == name:
            return service
    raise UnknownBranch(name, f"session {session.name!r} (MCP servers)")
