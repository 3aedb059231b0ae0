"""A tool that raises a BaseException that is not an Exception.

The model's arguments reach the application's tools, and plenty of trusted
code answers bad input with a BaseException: argparse (and click) call
``sys.exit(2)`` on arguments they cannot parse, asyncio code run inside a sync
tool ends with ``asyncio.CancelledError``, libraries define their own. Such a
call used to leave ``execute`` as itself, escape the actor, and take the
whole session down (``pride run`` exited with a traceback). It is a failed
call now, reported to the model; only ``trio.Cancelled`` and
``KeyboardInterrupt`` (and ``pride.Escalate``) still leave as themselves.
"""

from __future__ import annotations

import argparse
import asyncio

import pytest

from pride import Branch, Chat, Run, ScriptedModel, Session
from pride.llm import ScriptedReply, ToolCall
from pride.messages import ActionResponse
from pride.messages.commands import ActionCall
from pride.tools import ActionManager


class Interrupted(BaseException):
    """A library's own BaseException."""


def grep(args: list[str]) -> str:
    """Run a command line tool on the model's arguments (argparse exits on bad ones)."""
    parser = argparse.ArgumentParser(prog="grep")
    parser.add_argument("--count", type=int, required=True)
    return str(parser.parse_args(args).count)


def fetch() -> str:
    """Run asyncio code inside a sync tool; it ends cancelled."""
    raise asyncio.CancelledError("the event loop of the library was closed")


async def crawl() -> str:
    """An async tool whose library raises its own BaseException."""
    raise Interrupted("stopped by the library")


def interrupt() -> str:
    raise KeyboardInterrupt


async def test_a_tool_s_base_exception_is_a_failed_call_and_the_others_complete() -> None:
    manager = ActionManager([grep, fetch, crawl])
    calls = [
        ActionCall("grep", {"args": ["--count", "many"]}, call_id="a"),
        ActionCall("fetch", {}, call_id="b"),
        ActionCall("crawl", {}, call_id="c"),
        ActionCall("grep", {"args": ["--count", "3"]}, call_id="d"),
    ]
    outcomes = await manager.execute(calls)
    assert [outcome.call_id for outcome in outcomes] == ["a", "b", "c", "d"]
    assert outcomes[3].output == "3"
    names = ("SystemExit", "CancelledError", "Interrupted")
    for outcome, name in zip(outcomes[:3], names, strict=True):
        assert outcome.error is not None and name in outcome.error, outcome.error
        assert outcome.exception is not None and outcome.output is None
        assert isinstance(outcome.exception.__cause__, BaseException)


async def test_keyboard_interrupt_still_leaves_execute_as_itself() -> None:
    with pytest.raises(KeyboardInterrupt):
        await ActionManager([interrupt]).execute([ActionCall("interrupt", {})])


async def test_a_model_s_arguments_that_make_a_tool_exit_fail_the_call_not_the_session() -> None:
    """argparse's sys.exit(2) on the model's bad arguments: the model reads the failed
    call and answers; the session and the branch go on. Before: SystemExit escaped the
    actor, the session was cancelled and `async with Session()` raised SystemExit."""
    call = ToolCall("grep", {"args": ["--count", "many"]}, id="call_1")
    model = ScriptedModel([ScriptedReply(tool_calls=(call,)), "grep failed", "still here"])
    async with Session() as session:
        await session.spawn(Branch(name="agent", chat_model=model, tools=[grep]))
        messages = await session.ask("agent", Run("count them"))
        [response] = [message for message in messages if isinstance(message, ActionResponse)]
        assert response.output is None and "SystemExit" in str(response.error)
        assert messages[-1].text == "grep failed"
        assert await session.ask("agent", Chat("and now?")) == "still here"
