"""A call to an MCP server cancelled at any moment leaves the server serving.

Against the hand-written fake (fake_server.py), a real subprocess. Each
``trio.fail_after`` is a guard against a hang, never a measurement.
"""

from __future__ import annotations

import functools
import logging

import pytest
import trio
import trio.testing

from pride import Session

from .conftest import fake_command

FILLERS = 8
"""Notifications the server sends between a call's progress report and its answer, from
none to this many: each count lands the caller's cancellation at another moment of the
answer's hand-over in the SDK's receive loop."""

TRIES = 6
"""Calls cancelled at each count (the order of tasks within a scheduler step is random)."""


async def test_a_call_cancelled_as_its_answer_arrives_leaves_the_server_serving() -> None:
    """The caller cancels its call from the call's progress report, with the answer right
    behind the report. When the cancellation landed while the SDK handed the answer over
    (it had taken the answer's stream, and the cancelled call closed it), the SDK's receive
    loop died: the server still counted as running, and every later call failed with
    ClosedResourceError, never restarted. Now each later call is answered."""
    async with Session(max_restarts=0) as session:
        server = await session.spawn_mcp("prompt", command=fake_command("prompt"))
        for fillers in range(FILLERS + 1):
            for _ in range(TRIES):
                with trio.CancelScope() as scope:

                    async def cancel(
                        progress: float,
                        total: float | None,
                        message: str | None,
                        scope: trio.CancelScope = scope,
                    ) -> None:
                        scope.cancel()

                    await server.call_tool("report", {"fillers": fillers}, on_progress=cancel)
                assert scope.cancelled_caught
                with trio.fail_after(10):
                    assert (await server.call_tool("ping")).content[0].text == "pong"
        statistics = server.statistics()
        assert statistics.starts == 1
        assert statistics.in_flight == 0


async def _cancel_once_blocked(scope: trio.CancelScope) -> None:
    await trio.testing.wait_all_tasks_blocked()
    scope.cancel()


async def test_a_call_cancelled_before_its_request_left_tells_the_server_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The server reads nothing after listing its tools; one call's request fills the pipe,
    and a second call's request waits behind it. Cancelled, the second call has nothing to
    cancel on the server. Its task still held the id of the serving task's last request
    (the tools/list, answered long before), so it sent notifications/cancelled for that
    request, into the blocked pipe: its cancellation waited 2 s, logged that the notice
    could not be sent and that the call did not end. Now it ends at once, telling nothing."""
    caplog.set_level(logging.WARNING, "pride.mcp")
    async with Session(grace=0.2) as session:
        server = await session.spawn_mcp("deaf", command=fake_command("deaf"))
        async with trio.open_nursery() as nursery:
            fills = functools.partial(server.call_tool, "echo", {"text": "x" * 300_000})
            nursery.start_soon(fills)  # more than a pipe holds: the writer waits in it
            await trio.testing.wait_all_tasks_blocked()
            with trio.CancelScope() as scope:
                nursery.start_soon(_cancel_once_blocked, scope)
                await server.call_tool("echo", {"text": "queued"})
            assert scope.cancelled_caught
            assert server.statistics().cancelled == 1
            assert server.statistics().in_flight == 1  # the first call only
            assert [r.getMessage() for r in caplog.records if r.name == "pride.mcp"] == []
            nursery.cancel_scope.cancel()
