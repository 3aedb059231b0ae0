"""Attacker pass on pride as an MCP server: hostile calls, a vanishing client, a crowd.

The SDK's own ``ClientSession`` talks to ``build_server(session, ...)`` over the
SDK's in-memory streams, in this trio run (the subprocess form is
test_serve.py): fast enough to try every hostile shape, and the turns it
starts are visible to the test's observer.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
import trio
import trio.testing
from mcp import ClientSession, types
from mcp.shared.memory import create_client_server_memory_streams

from pride import Branch, RunFailed, RunStart, ScriptedModel, Session
from pride.llm import ModelRequest
from pride.mcp import build_server
from pride.mcp._serve import _pump_in

from .support import Waiter

released = trio.Event()


async def reply(request: ModelRequest) -> str:
    text = str(request.messages[-1]["content"])
    if text == "hang":
        await trio.sleep_forever()  # until its turn is cancelled
    return f"echo: {text[:20]}"


async def relay(branch: Branch, **options: Any) -> str:
    """Pass the arguments on to chat, as applications do."""
    return str(await branch.chat("relayed", **options))


@contextlib.asynccontextmanager
async def served(
    session: Session, image_urls: tuple[str, ...] = ()
) -> AsyncIterator[tuple[ClientSession, Any, trio.Event]]:
    """A client connected to ``build_server(session, ["helper"])``; yields the client,
    its write stream (close it to vanish) and an event set when ``server.run`` returns."""
    server = build_server(session, ["helper"], image_urls=image_urls)
    ended = trio.Event()
    async with create_client_server_memory_streams() as (client_streams, server_streams):
        async with trio.open_nursery() as nursery:

            async def run() -> None:
                read, write = server_streams
                await server.run(read, write, server.create_initialization_options())
                ended.set()

            nursery.start_soon(run)
            read, write = client_streams
            async with ClientSession(read, write) as client:
                await client.initialize()
                yield client, write, ended
            nursery.cancel_scope.cancel()


async def _team(session: Session) -> Branch:
    helper = await session.spawn(Branch(name="helper", chat_model=ScriptedModel(reply)))
    helper.register_operation("relay", relay)
    await session.spawn(Branch(name="private", chat_model=ScriptedModel(reply)))
    return helper


def _error(result: types.CallToolResult) -> str:
    assert result.isError, result
    text = result.content[0]
    assert isinstance(text, types.TextContent)
    return text.text


async def test_hostile_calls_are_errors_the_client_reads_and_serving_goes_on() -> None:
    """Unknown tools, a branch not exposed, wrong types, extra and deeply nested
    arguments, a model configuration smuggled into an operation: each an isError
    result naming the fault; a huge instruction is simply served."""
    async with Session() as session:
        await _team(session)
        async with served(session) as (client, _, _):
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert names == {"ask_helper", "helper_relay"}
            assert "offers: ask_helper" in _error(await client.call_tool("nope", {}))
            assert "no tool 'ask_private'" in _error(
                await client.call_tool("ask_private", {"instruction": "hi"})
            )
            assert "is not of type 'string'" in _error(
                await client.call_tool("ask_helper", {"instruction": 5})
            )
            nested: Any = "x"
            for _ in range(100):
                nested = [nested]
            deep = await client.call_tool("ask_helper", {"instruction": "hi", "extra": nested})
            assert "Additional properties are not allowed" in _error(deep)
            spec = {"provider": "openai", "model": "x", "base_url": "http://127.0.0.1:9/v1"}
            smuggled = await client.call_tool("helper_relay", {"chat_model": spec})
            assert "InvalidMessage" in _error(smuggled) or "model" in _error(smuggled)
            assert "Call.kwargs.chat_model" in _error(smuggled)
            rounds = await client.call_tool("helper_relay", {"max_rounds": 10**9})
            assert "beyond the ceiling" in _error(rounds)
            budget = await client.call_tool("helper_relay", {"budget": {"max_model_calls": 99}})
            assert "'budget' is the Call's own field" in _error(budget)
            huge = await client.call_tool("ask_helper", {"instruction": "y" * 1_000_000})
            assert not huge.isError and huge.content[0].text == "echo: " + "y" * 20  # type: ignore[union-attr]
            ok = await client.call_tool("ask_helper", {"instruction": "still here"})
            assert ok.content[0].text == "echo: still here"  # type: ignore[union-attr]


async def test_two_servers_in_one_process_keep_their_own_image_urls() -> None:
    """An image URL in an operation's arguments passes the server that trusts its prefix
    and is refused by the one that does not, both serving at once in one process."""
    image = {"images": ["https://cdn.example.com/a.png"]}
    async with Session() as session:
        await _team(session)
        async with (
            served(session, ("https://cdn.example.com/",)) as (trusting, _, _),
            served(session) as (strict, _, _),
        ):
            for _ in range(2):  # either order: neither server's setting leaks into the other
                assert "data: URLs only" in _error(await strict.call_tool("helper_relay", image))
                passed = await trusting.call_tool("helper_relay", image)
                assert not passed.isError, passed
        with pytest.raises(ValueError, match="with a host and a path"):
            build_server(session, ["helper"], image_urls=("https://",))


async def test_a_client_that_vanishes_mid_turn_has_its_turn_cancelled() -> None:
    """The client's stream ends while its turn runs: the turn is cancelled and
    finalised (RunFailed, cancelled), the server returns, the branch serves on."""
    async with Session() as session:
        helper = await _team(session)
        waiter = Waiter(session)
        async with served(session) as (client, write, ended):
            async with trio.open_nursery() as nursery:

                async def hang() -> None:
                    with contextlib.suppress(Exception, anyio.ClosedResourceError):
                        await client.call_tool("ask_helper", {"instruction": "hang"})

                nursery.start_soon(hang)
                started = await waiter.wait_for(lambda s: isinstance(s, RunStart))
                await write.aclose()  # the client is gone
                with trio.fail_after(5):
                    failed = await waiter.wait_for(
                        lambda s: isinstance(s, RunFailed) and s.turn_id == started.turn_id
                    )
                    await ended.wait()  # server.run returned by itself
                nursery.cancel_scope.cancel()
        assert failed.cancelled
        assert await helper.chat("after") == "echo: after"


async def test_many_concurrent_calls_are_each_answered_once() -> None:
    """Fifty calls at once over one client session: every one answered with its own
    reply (the branch serves them in turn, nothing lost or crossed)."""
    async with Session() as session:
        await _team(session)
        async with served(session) as (client, _, _):
            answers: dict[int, str] = {}

            async def ask(index: int) -> None:
                result = await client.call_tool("ask_helper", {"instruction": f"n{index}"})
                answers[index] = result.content[0].text  # type: ignore[union-attr]

            async with trio.open_nursery() as nursery:
                for index in range(50):
                    nursery.start_soon(ask, index)
        assert answers == {index: f"echo: n{index}" for index in range(50)}


class _Trickle:
    """A client's standard input, given a small piece per read."""

    def __init__(self, pieces: Any) -> None:
        self._pieces = pieces

    async def receive_some(self, max_bytes: int) -> bytes:
        return next(self._pieces, b"")


async def test_a_line_trickled_in_small_reads_is_searched_once() -> None:
    """``pride mcp``'s standard input is hostile: a line sent a little at a time was
    searched whole for its end at each read (15 MB in reads of 1,000 bytes took
    1.5 s of the event loop, quadratic), and each line found copied the rest of its
    read. Searched once, 16 MB in reads of 10 bytes is one line at once, and the
    message after it is read (a timeout if it is not). Not a subprocess: a pipe
    joins what a slow reader has not read yet, so only a reader's own input can be
    cut this fine."""
    blank = b" " * 10
    after = b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n'
    pieces = itertools.chain(itertools.repeat(blank, 1_600_000), [b"\n" + after])
    reader, reads = anyio.create_memory_object_stream[Any](1)
    async with reads, trio.open_nursery() as nursery:
        nursery.start_soon(_pump_in, _Trickle(pieces), reader)
        message = await reads.receive()
    assert message.message.root.method == "notifications/initialized"


class _Typed:
    """A client's standard input, given what the test writes, one chunk per read."""

    def __init__(self) -> None:
        self.write, self._chunks = trio.open_memory_channel[bytes](8)

    async def receive_some(self, max_bytes: int) -> bytes:
        try:
            return await self._chunks.receive()
        except trio.EndOfChannel:
            return b""


async def test_bad_lines_past_the_first_are_counted_once_a_minute_while_the_input_lasts(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """``pride mcp``'s client writes 25 lines that are not JSON-RPC, then one more a
    minute later: the first 20 are logged, and the 26th brings one line counting the
    six not logged. Before, nothing was said of them until the input ended, however
    long the client went on."""
    caplog.set_level(logging.WARNING, "pride.mcp")
    stdin = _Typed()
    reader, reads = anyio.create_memory_object_stream[Any](1)

    def said() -> list[str]:
        return [record.getMessage() for record in caplog.records]

    async with reads, trio.open_nursery() as nursery:
        nursery.start_soon(_pump_in, stdin, reader)
        await stdin.write.send(b"not json\n" * 25)
        await trio.sleep(60)
        await stdin.write.send(b"not json\n")
        await trio.testing.wait_all_tasks_blocked()
        assert len([text for text in said() if "not JSON-RPC (skipped)" in text]) == 20
        [counted] = [text for text in said() if "more lines of the MCP client" in text]
        assert counted == (
            "6 more lines of the MCP client that are not JSON-RPC in the last 60 s (26 in all)"
        )
        await stdin.write.aclose()
    assert len(said()) == 21  # nothing left unsaid at the end of the input
