"""`pride.client` against a real ``pride serve`` subprocess, under trio and under asyncio.

One server subprocess serves the module (`served`); each test leaves it as
it found it.
"""

from __future__ import annotations

import asyncio
from typing import Any
from uuid import UUID

import pytest
import trio

import pride
from pride import Approve, ChatAndRecord, Operate, Run
from pride.client import Client, RequestRefused
from pride.llm import ToolCall
from pride.messages import ActionResponse, RunFailed, RunStart, unstructure

from .conftest import SCOPED, TOKEN, Served, in_process


async def test_ask_stream_send_and_the_tree_on_trio(served: Served) -> None:
    async with Client(served.url, TOKEN) as client:
        assert await client.ask("writer", ChatAndRecord(instruction="hi")) == "echo: hi"
        result, turn_id = await client.ask_with_turn("writer", {"type": "Chat", "instruction": "x"})
        assert result == "echo: x" and isinstance(turn_id, UUID)
        async with client.stream("reader", Run(instruction="stream me")) as items:
            chunks = [item async for item in items]
        assert "".join(c for c in chunks if isinstance(c, str)) == "echo: stream me"
        assert items.turn_id is not None
        sent = await client.send("reader", ChatAndRecord(instruction="later"))
        with trio.fail_after(30):
            while (state := await client.turn(sent))["state"] == "running":
                await trio.sleep(0.02)
        assert state["state"] == "done" and state["result"] == "echo: later"
        page = await client.messages("writer", offset=0, limit=500)
        assert any(isinstance(m, pride.Instruction) and m.instruction == "hi" for m in page)
        tree = await client.branches()
        assert {"writer", "reader", "pilot"} <= {b["name"] for b in tree["branches"]}


async def test_errors_are_prides_own_classes(served: Served) -> None:
    async with Client(served.url, SCOPED) as scoped:
        with pytest.raises(pride.UnknownBranch):
            await scoped.ask("writer", ChatAndRecord(instruction="x"))  # out of scope
    async with Client(served.url, "a-wrong-token-0123456789") as wrong:
        with pytest.raises(RequestRefused) as refused:
            await wrong.ask("writer", ChatAndRecord(instruction="x"))
        assert refused.value.status == 401
    async with Client(served.url, TOKEN) as client:
        with pytest.raises(pride.UnknownBranch):
            await client.ask("nobody", ChatAndRecord(instruction="x"))
        with pytest.raises(pride.InvalidMessage) as invalid:
            await client.ask("writer", {"type": "Chat", "instruction": 5})
        assert "instruction" in str(invalid.value)
        with pytest.raises(pride.BudgetExceeded) as spent:
            await client.ask("frugal", ChatAndRecord(instruction="x"))
        assert (spent.value.limit, spent.value.used, spent.value.allowed) == (
            "max_model_calls",
            1,
            0,
        )
        with pytest.raises(pride.ApprovalRequired) as held:
            await client.ask("pilot", Operate(instruction="use the tool", actions=True))
        assert [p.function for p in held.value.pending] == ["launch"]
        assert [a["turn_id"] for a in await client.approvals()] == [str(held.value.turn_id)]
        await client.resolve(held.value.turn_id, {"call-1": Approve()})
        assert await client.approvals() == []
        with pytest.raises(TimeoutError):
            await client.ask("support-1", ChatAndRecord(instruction="hang"), timeout=0.2)
        with pytest.raises(pride.BudgetExceeded):
            async with client.stream("frugal", Run(instruction="x")) as items:
                async for _ in items:
                    pass


async def test_a_ref_is_a_target_for_prides_own_ask_and_stream(served: Served) -> None:
    async with Client(served.url, TOKEN) as client:
        writer = client.ref("writer")
        assert await pride.ask(writer, ChatAndRecord(instruction="by ref")) == "echo: by ref"
        async with pride.stream(client.ref("reader"), Run(instruction="ref stream")) as items:
            text = "".join([item async for item in items if isinstance(item, str)])
        assert text == "echo: ref stream"
        with pytest.raises(pride.UnknownBranch):
            await pride.ask(client.ref("nobody"), ChatAndRecord(instruction="x"))


async def test_cancelling_an_ask_cancels_the_turn_on_the_server(served: Served) -> None:
    async with Client(served.url, TOKEN) as client:
        async with client.events(branch="support-1", types=[RunStart, RunFailed]) as signals:
            with trio.fail_after(30):
                async with trio.open_nursery() as asking:
                    asking.start_soon(client.ask, "support-1", ChatAndRecord(instruction="hang"))
                    started = await signals.__anext__()
                    assert isinstance(started, RunStart)
                    asking.cancel_scope.cancel()  # the caller gives up: the request closes
                failed = await signals.__anext__()
        assert isinstance(failed, RunFailed) and failed.cancelled
        assert failed.turn_id == started.turn_id


def _on_asyncio(url: str) -> tuple[Any, list[Any], type[BaseException]]:
    async def main() -> tuple[Any, list[Any], type[BaseException]]:
        async with Client(url, TOKEN) as client:
            answer = await client.ask("writer", ChatAndRecord(instruction="from asyncio"))
            async with client.stream("reader", Run(instruction="asyncio stream")) as items:
                chunks = [item async for item in items]
            try:
                await client.ask("nobody", ChatAndRecord(instruction="x"))
            except pride.UnknownBranch as exc:
                error: type[BaseException] = type(exc)
            with pytest.raises(RuntimeError, match="trio"):
                client.ref("writer")
            # Cancelling the asyncio task that awaits an ask closes its request.
            hang = {"type": "Chat", "instruction": "hang"}
            task = asyncio.ensure_future(client.ask("support-1", hang))
            while not any(
                b["name"] == "support-1" and b["state"] == "busy"
                for b in (await client.branches())["branches"]
            ):
                await asyncio.sleep(0.01)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            return answer, chunks, error

    return asyncio.run(main())


async def test_the_client_runs_under_asyncio_run(served: Served) -> None:
    answer, chunks, error = await trio.to_thread.run_sync(_on_asyncio, served.url)
    assert answer == "echo: from asyncio"
    assert "".join(c for c in chunks if isinstance(c, str)) == "echo: asyncio stream"
    assert error is pride.UnknownBranch
    async with Client(served.url, TOKEN) as client:
        with trio.fail_after(30):  # the hung turn was cancelled with its request
            while any(
                b["name"] == "support-1" and b["state"] != "idle"
                for b in (await client.branches())["branches"]
            ):
                await trio.sleep(0.02)


async def test_a_served_branch_s_escalation_does_not_crash_its_caller() -> None:
    """A served branch that escalates (its state not to be trusted) is restarted by
    its server, which answers the ask with the ``Escalate``; the client raised it
    as ``pride.Escalate``, so a tool of a branch asking the served one crashed
    *its* branch too (a restart, and past the intensity the caller's session):
    a server's bytes steered the caller's runtime. What only pride's runtime
    raises on purpose (``Escalate``, ``LoopBreak``, ``StopStream``, ``Defer``)
    arrives as a `RequestRefused` naming it, an error the tool reports."""

    def crash(request: Any) -> str:
        raise pride.Escalate("the served branch's state is not to be trusted")

    async with pride.Session("served") as served:
        await served.spawn(pride.Branch(name="crasher", chat_model=pride.ScriptedModel(crash)))
        async with in_process(served) as (_, url), Client(url, TOKEN) as client:

            @pride.tool
            async def relay(question: str) -> str:
                """Ask the served branch."""
                return str(await client.ask("crasher", ChatAndRecord(instruction=question)))

            def script(request: Any) -> Any:
                if request.messages[-1].get("role") == "tool":
                    return "relayed"
                return ToolCall(name="relay", arguments={"question": "hi"}, id="call-1")

            restarts: list[Any] = []
            async with pride.Session("caller") as caller:
                caller.observe(pride.BranchRestarted, handler=restarts.append)
                await caller.spawn(
                    pride.Branch(
                        name="caller", tools=[relay], chat_model=pride.ScriptedModel(script)
                    )
                )
                assert await caller.ask("caller", Run(instruction="go")) is not None
                history = caller.get_branch("caller").messages
                reported = [unstructure(m) for m in history if isinstance(m, ActionResponse)]
    assert restarts == []
    assert "RequestRefused" in str(reported) and "Escalate" in str(reported), reported


async def test_a_streamed_turn_s_reasoning_reaches_the_client_as_its_own_items(
    served: Served,
) -> None:
    """The native stream carries reasoning deltas in their wire form, apart from the
    text chunks, and the reply's Reasoning messages: the client drops none."""
    async with Client(served.url, TOKEN) as client:
        async with client.stream("reader", Run(instruction="think:Why not.")) as items:
            got = [item async for item in items]
        async with pride.stream(client.ref("reader"), Run(instruction="think:Why.")) as items:
            by_ref = [item async for item in items]
    assert "".join(i for i in got if isinstance(i, str)) == "the answer"
    deltas = [i for i in got if isinstance(i, dict) and i.get("type") == "ReasoningDelta"]
    assert "".join(d["text"] for d in deltas) == "Why not."
    kept = [i for i in got if isinstance(i, dict) and i.get("type") == "Reasoning"]
    assert [k["reasoning"] for k in kept] == ["Why not.", ""]  # the redacted one: no text
    assert [i["text"] for i in by_ref if isinstance(i, dict) and i["type"] == "ReasoningDelta"] == [
        "Why."
    ]
