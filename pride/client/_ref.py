"""`ServedBranch`: a branch behind ``pride serve`` as a target of ``pride.ask/send/stream``.

``await pride.ask(client.ref("writer"), Chat("..."))`` in trio code sends the
command over HTTP and answers the envelope with the server's answer, so code
written against local branches (a flow, a tool that asks another agent) runs
unchanged against a served one. It implements the [`Target`][pride.Target]
protocol: ``deliver`` accepts the envelope at once (the server's mailbox is
the backpressure: a full one answers ``MailboxFull``) and a task of the
client's nursery carries it: an ask for a command, the event stream for a
streamed one. Cancelling the envelope (its caller gave up, a timeout, leaving
a stream block) cancels that task, which closes the request, and the server
cancels the turn. Closing the client cancels what it still carries.

Only trio code has targets: a trio nursery serves them, opened when the
client is entered on trio.
"""

from __future__ import annotations

import uuid
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, Protocol

import trio

from ..errors import BranchClosed, TurnCancelled
from ..messages import WorkCommand

if TYPE_CHECKING:
    from ..actors import Reply

__all__ = ["Carriers", "Client", "ServedBranch", "close_carriers", "open_carriers"]


class Client(Protocol):
    """What a target needs of its `pride.client.Client` (which imports this module)."""

    @property
    def base_url(self) -> str: ...

    async def ask_with_turn(
        self, name: str, command: WorkCommand, timeout: float | None = None
    ) -> tuple[Any, uuid.UUID | None]: ...

    def stream(self, name: str, command: WorkCommand) -> AbstractAsyncContextManager[Any]: ...


class Carriers:
    """The trio nursery whose tasks carry envelopes for a client's targets."""

    def __init__(self) -> None:
        self._manager = trio.open_nursery()
        self.nursery: trio.Nursery | None = None

    async def open(self) -> None:
        self.nursery = await self._manager.__aenter__()

    async def close(self) -> None:
        nursery, self.nursery = self.nursery, None
        if nursery is None:
            return
        nursery.cancel_scope.cancel()
        # Entered with no exception: a carrier answers its envelope with whatever
        # went wrong, so no task fails and no exception group leaves here.
        await self._manager.__aexit__(None, None, None)


def _on_trio() -> bool:
    try:
        trio.lowlevel.current_task()
    except RuntimeError:  # not in trio: asyncio, say
        return False
    return True


async def open_carriers() -> Carriers | None:
    """A client's carriers, opened now when running on trio (else None: no targets)."""
    if not _on_trio():
        return None
    carriers = Carriers()
    await carriers.open()
    return carriers


async def close_carriers(carriers: Carriers | None) -> None:
    """Cancel and wait for what ``carriers`` still carry."""
    if carriers is not None:
        await carriers.close()


class _Carrier:
    """One envelope's carrying task: its cancel scope, and the envelope's holder while queued.

    While queued (its task not yet run) nothing was sent, so a caller's cancel
    drops the envelope at once (``answers_cancel`` False, as a mailbox).
    """

    __slots__ = ("scope",)
    answers_cancel = False

    def __init__(self) -> None:
        self.scope = trio.CancelScope()

    def forget_dropped(self) -> None:  # the caller dropped the queued envelope
        self.scope.cancel()


class ServedBranch:
    """Branch ``name`` of the server ``client`` talks to, as a target (module docstring).

    Attributes:
        name: the branch's name on the server.
    """

    __slots__ = ("_carriers", "_client", "name")

    def __init__(self, client: Client, name: str, carriers: Carriers) -> None:
        self._client = client
        self._carriers = carriers
        self.name = name

    @property
    def id(self) -> uuid.UUID:
        """A stable stand-in for the branch's id: from the server's URL and the name."""
        return uuid.uuid5(uuid.NAMESPACE_URL, f"{self._client.base_url}/v1/branches/{self.name}")

    def __repr__(self) -> str:
        return f"<ServedBranch {self.name!r} at {self._client.base_url}>"

    async def deliver(self, envelope: Reply) -> None:
        """Accept ``envelope`` at once (see `deliver_nowait`)."""
        self.deliver_nowait(envelope)

    def deliver_nowait(self, envelope: Reply) -> None:
        """Accept ``envelope``: a task of the client carries it to the server.

        Raises:
            TypeError: not a work command (the server supervises its own tree).
            BranchClosed: the client is closed.
        """
        if not isinstance(envelope.command, WorkCommand):
            raise TypeError(
                f"{type(envelope.command).__name__} is for supervisors; "
                "a served branch takes work commands"
            )
        nursery = self._carriers.nursery
        if nursery is None:
            raise BranchClosed(self.name, "its client is closed")
        carrier = _Carrier()
        envelope.hold(carrier)
        nursery.start_soon(self._carry, envelope, carrier)

    async def _carry(self, envelope: Reply, carrier: _Carrier) -> None:
        command = envelope.command
        assert isinstance(command, WorkCommand)  # deliver_nowait checked
        channel = envelope.stream
        try:
            if envelope.done:  # dropped by its caller before this task ran: nothing sent
                return
            with carrier.scope:
                try:
                    if channel is None:
                        envelope.start(None, carrier.scope)
                        result, turn_id = await self._client.ask_with_turn(self.name, command)
                        envelope.turn_id = turn_id
                        envelope.succeed(result)
                    else:
                        await self._stream(envelope, command, carrier, channel)
                except Exception as exc:  # the turn's error, or the server's refusal
                    envelope.fail(exc)
            if not envelope.done:  # cancelled: by its caller, or the client closing
                reason = envelope.cancel_reason or "shutdown"
                envelope.fail(TurnCancelled(reason, f"the request to {self.name!r} was closed"))
        finally:
            if channel is not None:
                channel.close()

    async def _stream(
        self,
        envelope: Reply,
        command: WorkCommand,
        carrier: _Carrier,
        channel: trio.MemorySendChannel[Any],
    ) -> None:
        started = False
        async with self._client.stream(self.name, command) as items:
            async for item in items:
                if not started:
                    started = True
                    envelope.start(items.turn_id, carrier.scope)
                try:
                    await channel.send(item)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return  # the caller left the stream: its block cancels the envelope
        if not started:
            envelope.start(items.turn_id, carrier.scope)
        envelope.succeed(None)
