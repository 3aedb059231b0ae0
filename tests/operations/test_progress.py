"""Plain Python tools report progress: ToolProgress signals and Run stream items."""

from __future__ import annotations

import json

import pytest
import trio

from pride import ActionCall, ActionResponse, Branch, Run, ScriptedModel, Session, ToolProgress
from pride.llm import ModelRequest, ScriptedReply, ToolCall
from pride.tools import report_progress


async def crawl(pages: int) -> str:
    """Crawl some pages.

    Args:
        pages: How many.
    """
    for page in range(1, pages + 1):
        await report_progress(page, total=pages, message=f"page {page}")
    return f"{pages} pages"


def count_in_thread(n: int) -> int:
    """A sync tool reporting from its worker thread.

    Args:
        n: How far to count.
    """
    for i in range(1, n + 1):
        trio.from_thread.run(report_progress, i, n)
    return n


async def bad_report() -> str:
    """Report a progress that is not a number."""
    await report_progress(float("nan"))
    return "unreachable"


def agent(calls: list[ToolCall]) -> ScriptedModel:
    def reply(request: ModelRequest) -> ScriptedReply | str:
        if not any(m["role"] == "tool" for m in request.messages):
            return ScriptedReply("", tuple(calls))
        return "done"

    return ScriptedModel(reply)


async def test_report_progress_outside_a_call_is_a_no_op() -> None:
    assert await report_progress(1, 2, "nobody listens") is False
    with pytest.raises(ValueError, match="progress must be a finite number"):
        await report_progress("half")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="message must be a string"):
        await report_progress(1, message=3)  # type: ignore[arg-type]


async def test_plain_tools_report_progress_to_observers_and_streams() -> None:
    model = agent([ToolCall("crawl", {"pages": 2}, id="c1"), ToolCall("count_in_thread", {"n": 2})])
    async with Session() as session:
        seen: list[ToolProgress] = []
        session.observe(ToolProgress, handler=seen.append)
        branch = await session.spawn(
            Branch(name="crawler", chat_model=model, tools=[crawl, count_in_thread])
        )
        async with branch.run("go") as items:
            streamed = [item async for item in items]
    progress = [item for item in streamed if isinstance(item, ToolProgress)]
    assert sorted((p.function, p.progress) for p in progress) == sorted(
        (p.function, p.progress) for p in seen
    )
    crawl_reports = [p for p in seen if p.function == "crawl"]
    assert [(p.progress, p.total, p.message) for p in crawl_reports] == [
        (1.0, 2.0, "page 1"),
        (2.0, 2.0, "page 2"),
    ]
    assert crawl_reports[0].call_id == "c1"
    thread_reports = [p for p in seen if p.function == "count_in_thread"]
    assert [p.progress for p in thread_reports] == [1.0, 2.0]
    assert thread_reports[0].turn_id == crawl_reports[0].turn_id is not None
    first_response = next(i for i, x in enumerate(streamed) if isinstance(x, ActionResponse))
    assert all(streamed.index(p) < first_response for p in progress)


async def test_a_bad_report_fails_only_that_call() -> None:
    async with Branch(name="b", tools=[bad_report]) as branch:
        [response] = await branch.act(ActionCall("bad_report", {}))
    assert response.error is not None and "finite number" in response.error


async def test_a_call_without_a_provider_id_is_named_by_its_request() -> None:
    """An Act (no model, no call id): ToolProgress.call_id is the ActionRequest's id."""
    async with Session() as session:
        seen: list[ToolProgress] = []
        session.observe(ToolProgress, handler=seen.append)
        branch = await session.spawn(Branch(name="b", tools=[crawl]))
        await branch.act(ActionCall("crawl", {"pages": 1}))
    request = next(m for m in branch.messages if getattr(m, "function", None) == "crawl")
    assert [p.call_id for p in seen] == [str(request.id)]
    assert seen[0].turn_id is None  # an Act is not a turn


async def test_progress_through_ask_reaches_the_observer_only() -> None:
    """A Run sent with ask returns its messages; progress goes to the observer, not the list."""
    async with Session() as session:
        seen: list[ToolProgress] = []
        session.observe(ToolProgress, handler=seen.append)
        branch = await session.spawn(
            Branch(name="b", chat_model=agent([ToolCall("crawl", {"pages": 1})]), tools=[crawl])
        )
        items = await session.ask(branch, Run("go"))
    assert len(seen) == 1
    assert not any(isinstance(item, ToolProgress) for item in items)


async def test_react_stream_yields_progress_of_a_rounds_tools() -> None:
    """ReActStream's items are its rounds and answer, with the rounds' tool progress between."""
    from pride import OperateResult

    def reply(request: ModelRequest) -> ScriptedReply | str:
        name = (request.response_format or {}).get("name")
        if name == "ReActAnalysis":
            if not any(m["role"] == "tool" for m in request.messages):
                return ScriptedReply("", (ToolCall("crawl", {"pages": 2}, id="r1"),))
            return json.dumps(
                {
                    "analysis": "crawled",
                    "extension_needed": False,
                    "reason": {"title": "t", "content": "c", "confidence_score": 0.9},
                }
            )
        return '{"answer": "done"}'

    async with Branch(name="b", chat_model=ScriptedModel(reply), tools=[crawl]) as branch:
        async with branch.ReActStream("crawl two pages", max_extensions=0) as items:
            streamed = [item async for item in items]
    kinds = [type(item).__name__ for item in streamed]
    assert kinds == ["ToolProgress", "ToolProgress", "OperateResult", "str"]
    assert [item.progress for item in streamed[:2]] == [1.0, 2.0]
    assert isinstance(streamed[2], OperateResult)
