"""The target protocol: send, send_nowait, ask and stream accept any pride.Target.

The relay below is a target that is not a Branch: it hands each envelope to
another branch and answers it from there, as a branch on another process
(the cluster's RemoteBranchRef) does over the wire.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import trio
import trio.testing

import pride
from pride import (
    Branch,
    BranchClosed,
    Chat,
    MailboxFull,
    Reply,
    Run,
    Session,
    Target,
    TurnCancelled,
)
from tests.helpers import Gate, echo_model


class _Relay:
    """A Target that serves envelopes by asking ``inner`` on their behalf."""

    def __init__(self, inner: Branch, nursery: trio.Nursery) -> None:
        self.id = uuid.uuid4()
        self.name = "relay"
        self.inner = inner
        self.nursery = nursery
        self.closed = False
        self.delivered: list[Reply] = []

    async def deliver(self, envelope: Reply) -> None:
        if self.closed:
            raise BranchClosed(self.name, "the relay was closed")
        if envelope.stream is not None:
            self._accept(envelope, None)
            return
        self._accept(envelope, await pride.send(self.inner, envelope.command))

    def deliver_nowait(self, envelope: Reply) -> None:
        if self.closed:
            raise BranchClosed(self.name, "the relay was closed")
        self._accept(envelope, pride.send_nowait(self.inner, envelope.command))

    def _accept(self, envelope: Reply, inner: Reply | None) -> None:
        self.delivered.append(envelope)
        if inner is None:
            self.nursery.start_soon(self._pump, envelope)
        else:
            envelope.start(None, _Cancel(inner))
            self.nursery.start_soon(self._answer, envelope, inner)

    async def _answer(self, envelope: Reply, inner: Reply) -> None:
        try:
            result = await inner.result()
        except Exception as exc:
            envelope.turn_id = inner.turn_id
            envelope.fail(exc)
        else:
            envelope.turn_id = inner.turn_id
            envelope.succeed(result)

    async def _pump(self, envelope: Reply) -> None:
        assert envelope.stream is not None
        envelope.start(None, None)
        try:
            async with envelope.stream, pride.stream(self.inner, envelope.command) as items:
                async for item in items:
                    await envelope.stream.send(item)
        except Exception as exc:
            envelope.fail(exc)
        else:
            envelope.succeed(None)


class _Cancel:
    def __init__(self, inner: Reply) -> None:
        self.inner = inner

    def cancel(self) -> None:
        self.inner.cancel("caller")


def _as_target(value: _Relay | Branch) -> Target:
    return value  # what mypy would check: both implement the protocol


async def test_ask_and_send_accept_a_target_that_is_not_a_branch() -> None:
    """ask and send deliver to the target and return what it answers."""
    async with Branch(chat_model=echo_model()) as inner, trio.open_nursery() as nursery:
        relay = _as_target(_Relay(inner, nursery))
        assert await pride.ask(relay, Chat("one")) == "re: one"
        reply = await pride.send(relay, Chat("two"))
        assert reply.branch is relay
        assert await reply.result() == "re: two"
        assert reply.turn_id is not None  # the target reported the turn it ran
        assert len(inner.messages) == 0  # Chat records nothing, wherever it runs


async def test_send_nowait_reports_a_full_target() -> None:
    """A target without room raises MailboxFull from send_nowait; nothing is accepted."""
    gate = Gate()
    async with (
        Branch(chat_model=gate.model, mailbox_size=1) as inner,
        trio.open_nursery() as nursery,
    ):
        relay = _Relay(inner, nursery)
        running = pride.send_nowait(relay, Chat("running"))
        await gate.started.wait()
        queued = pride.send_nowait(relay, Chat("queued"))
        with pytest.raises(MailboxFull):
            pride.send_nowait(relay, Chat("overflow"))
        assert len(relay.delivered) == 2
        gate.release("running")
        gate.release("queued")
        assert await running.result() == "reply to running"
        assert await queued.result() == "reply to queued"


async def test_a_closed_target_raises_branch_closed() -> None:
    """send, send_nowait and ask all report a closed target with BranchClosed."""
    async with Branch(chat_model=echo_model()) as inner, trio.open_nursery() as nursery:
        relay = _Relay(inner, nursery)
        relay.closed = True
        with pytest.raises(BranchClosed):
            await pride.send(relay, Chat("x"))
        with pytest.raises(BranchClosed):
            pride.send_nowait(relay, Chat("x"))
        with pytest.raises(BranchClosed):
            await pride.ask(relay, Chat("x"))


async def test_stream_from_a_target_that_is_not_a_branch() -> None:
    """stream hands the target a channel; the items it sends arrive in order."""
    async with (
        Branch(chat_model=echo_model()) as inner,
        trio.open_nursery() as nursery,
    ):
        relay = _Relay(inner, nursery)
        async with pride.stream(relay, Run("hello")) as items:
            kinds = [type(item).__name__ async for item in items]
        assert kinds[0] == "Instruction" and kinds[-1] == "AssistantResponse"
        assert len(inner.messages) == 2


async def test_a_cancelled_ask_reaches_the_target() -> None:
    """A caller giving up cancels through the canceller the target gave to start()."""
    gate = Gate()
    async with Branch(chat_model=gate.model) as inner, trio.open_nursery() as nursery:
        relay = _Relay(inner, nursery)
        reply = await pride.send(relay, Chat("slow"))
        await gate.started.wait()
        reply.cancel()
        with pytest.raises(TurnCancelled):
            await reply.result()
        assert inner.active_turn_id is None  # the inner turn was cancelled and finalised


async def test_a_session_accepts_a_target_of_its_own() -> None:
    """session.ask/send pass a Target through unresolved."""
    async with Session() as session, trio.open_nursery() as nursery:
        inner = await session.spawn(Branch(name="inner", chat_model=echo_model()))
        relay = _Relay(inner, nursery)
        assert await session.ask(relay, Chat("hi")) == "re: hi"
        reply = await session.send(relay, Chat("again"))
        assert await reply.result() == "re: again"


async def test_something_else_is_refused_with_a_clear_error() -> None:
    """Anything that is neither a target, a BranchRef, a name nor an id is a TypeError."""
    with pytest.raises(TypeError, match=r"pride\.Target"):
        await pride.ask(object(), Chat("x"))
    with pytest.raises(TypeError, match=r"pride\.Target"):
        pride.send_nowait(42, Chat("x"))


async def test_a_branch_is_recognised_by_the_protocol_alone() -> None:
    """No sentinel attribute: a Branch is a target because it implements deliver."""
    branch: Any = Branch(chat_model=echo_model())
    assert not hasattr(branch, "_is_branch")
    assert callable(branch.deliver) and callable(branch.deliver_nowait)
