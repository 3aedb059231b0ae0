"""Cross-branch waits that would deadlock fail fast; no ExceptionGroup leaks."""

from __future__ import annotations

import pytest
import trio

import pride
from pride import Branch, Chat, ReentrancyError
from tests.helpers import echo_model


async def test_a_asks_b_asks_a_fails_fast() -> None:
    """A turn of A asking B, whose turn asks A, raises ReentrancyError instead of hanging."""
    async with (
        Branch(name="A", chat_model=echo_model()) as a,
        Branch(name="B", chat_model=echo_model()) as b,
    ):

        async def ask_back(branch: Branch) -> str:
            try:
                return await pride.ask(a, Chat("back to A"))
            except ReentrancyError as exc:
                return f"refused: {exc}"

        async def ask_b(branch: Branch) -> str:
            return await pride.ask(b, pride.Call("ask_back"))

        a.register_operation("ask_b", ask_b)
        b.register_operation("ask_back", ask_back)
        result = await a.call("ask_b")
    assert result.startswith("refused: ")
    assert "B -> A -> B" in result  # B, asking A, is refused: A already waits on B


async def test_a_waiting_on_its_own_queue_fails_fast() -> None:
    """Awaiting a reply queued behind one's own turn raises instead of deadlocking."""
    async with Branch(name="solo", chat_model=echo_model()) as branch:

        async def self_send(branch: Branch) -> str:
            reply = await pride.send(branch, Chat("queued behind me"))
            try:
                await reply.result()
            except ReentrancyError:
                return "refused"
            return "waited"

        branch.register_operation("self_send", self_send)
        assert await branch.call("self_send") == "refused"
        assert await branch.chat("after") == "re: after"


async def test_chains_without_cycles_work() -> None:
    """A asks B asks C completes normally."""
    async with (
        Branch(name="A", chat_model=echo_model()) as a,
        Branch(name="B", chat_model=echo_model()) as b,
        Branch(name="C", chat_model=echo_model()) as c,
    ):

        async def to_c(branch: Branch) -> str:
            return await pride.ask(c, Chat("deep"))

        async def to_b(branch: Branch) -> str:
            return await pride.ask(b, pride.Call("to_c"))

        b.register_operation("to_c", to_c)
        a.register_operation("to_b", to_b)
        assert await a.call("to_b") == "re: deep"
        assert a._waiting_on == {} and b._waiting_on == {}


async def test_errors_cross_the_api_bare() -> None:
    """ask, send+result, stream and the facade raise the one exception, never a group."""
    model = pride.ScriptedModel([pride.errors.BadRequest("bad", status=400)] * 4)
    async with Branch(chat_model=model) as branch:
        with pytest.raises(pride.errors.BadRequest):
            await pride.ask(branch, Chat("a"))
        reply = await pride.send(branch, Chat("b"))
        with pytest.raises(pride.errors.BadRequest):
            await reply.result()
        with pytest.raises(pride.errors.BadRequest):
            await branch.chat("c")
        with pytest.raises(pride.errors.BadRequest):
            async with pride.stream(branch, Chat("d")) as items:
                async for _ in items:
                    pass


async def test_crash_in_standalone_branch_surfaces_bare() -> None:
    """Escalate from a turn answers the caller and leaves `async with` as itself."""

    async def escalate(branch: Branch) -> None:
        raise pride.Escalate("state is corrupt")

    caught: list[BaseException] = []
    with pytest.raises(pride.Escalate):
        async with Branch(chat_model=echo_model()) as branch:
            branch.register_operation("escalate", escalate)
            try:
                await branch.call("escalate")
            except pride.Escalate as exc:
                caught.append(exc)
            await trio.sleep_forever()
    assert len(caught) == 1
