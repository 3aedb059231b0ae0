"""Turns on a thinking Anthropic model, through the loopback server acting as the real API.

The server (``require_thinking=True``) signs each thinking block it returns
and refuses, as Anthropic's API does, a tool loop whose assistant turn does
not open with its thinking block unchanged. These tests run on the real clock
(an autojump clock would jump during socket I/O).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import pride
from pride import (
    ApprovalRequired,
    Approve,
    AssistantResponse,
    Branch,
    Communicate,
    Reasoning,
    ReasoningDelta,
    Run,
    Session,
    iModel,
)
from pride.llm import RetryPolicy, ScriptedModel, ScriptedReply, ToolCall
from pride.testing import openai_server
from tests.operations.support import kinds


def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b


def mul(a: int, b: int) -> int:
    """Multiply two numbers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a * b


def _thinking_model(server: Any) -> iModel:
    return iModel(
        "anthropic/claude-sonnet-4-5",
        base_url=server.base_url,
        api_key="sk-ant-test",
        retry=RetryPolicy(max_retries=0),
        thinking=2048,
    )


def _results(body: dict[str, Any]) -> int:
    return sum(
        1
        for message in body["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    )


def _only_results(message: dict[str, Any]) -> bool:
    content = message["content"]
    return isinstance(content, list) and all(b.get("type") == "tool_result" for b in content)


def _continues(body: dict[str, Any]) -> bool:
    """Whether the request continues a tool loop (it ends with tool results)."""
    return _only_results(body["messages"][-1])


def _turn_opening(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The first assistant message after the last user message that is not tool results."""
    start = max(i for i, m in enumerate(messages) if m["role"] == "user" and not _only_results(m))
    return next(m for m in messages[start:] if m["role"] == "assistant")


def researcher(body: dict[str, Any]) -> ScriptedReply:
    """A thinking model working through ReAct: add, then multiply, then analyse and answer."""
    if "'Analysis'" in json.dumps(body.get("system")):  # a cached system text is a block list
        return ScriptedReply(json.dumps({"answer": "(2 + 3) * 4 = 20"}), thinking="State it.")
    done = _results(body)
    if done == 0:
        return ScriptedReply(tool_calls=(ToolCall("add", {"a": 2, "b": 3}),), thinking="Add first.")
    if done == 1:
        return ScriptedReply(tool_calls=(ToolCall("mul", {"a": 5, "b": 4}),), thinking="Now x4.")
    analysis = {"analysis": "5 * 4 = 20", "extension_needed": False}
    return ScriptedReply(json.dumps(analysis), thinking="Both tools answered.")


async def test_a_react_turn_with_two_tools_keeps_its_thinking_through_the_loop() -> None:
    """Every call after a tool result opens the assistant's turn with its signed thinking
    block, so the server (refusing as the API does) refuses nothing and the turn answers."""
    async with openai_server(researcher, require_thinking=True) as server:
        async with Branch(chat_model=_thinking_model(server), tools=[add, mul]) as branch:
            answer = await branch.ReAct("What is (2 + 3) * 4?")
    assert answer == "(2 + 3) * 4 = 20"
    assert server.refusals == []
    continued = [r.body for r in server.requests if _continues(r.body)]
    assert len(continued) == 2
    for body in continued:  # the assistant's turn opens with its signed thinking block
        opening = _turn_opening(body["messages"])
        assert opening["content"][0]["type"] == "thinking"
        assert opening["content"][0]["signature"]
    recorded = [m for m in branch.messages if isinstance(m, Reasoning)]
    assert [m.reasoning for m in recorded] == [
        "Add first.",
        "Now x4.",
        "Both tools answered.",
        "State it.",
    ]
    answers = [m.assistant_response for m in branch.messages if isinstance(m, AssistantResponse)]
    assert all("Add first." not in text for text in answers)


async def test_the_same_turn_without_its_thinking_blocks_is_refused() -> None:
    """The control: a conversation that lost its thinking blocks fails at the second call."""
    async with openai_server(researcher, require_thinking=True) as server:
        model = _thinking_model(server)
        async with Branch(chat_model=model, tools=[add, mul]) as branch:
            await branch.ReAct("What is (2 + 3) * 4?")
            body = server.requests[1].body
            stripped = [
                {**m, "content": [b for b in m["content"] if b.get("type") != "thinking"]}
                if m["role"] == "assistant"
                else m
                for m in body["messages"]
            ]
            request = pride.llm.ModelRequest(stripped, system=body.get("system"))
            try:
                await model.invoke(request)
            except pride.BadRequest as error:
                refused = str(error)
            else:
                refused = ""
    assert "must start with a thinking block" in refused
    assert len(server.refusals) == 1


async def test_a_streamed_turn_yields_thinking_as_its_own_items() -> None:
    """Run streams ReasoningDelta items, then the Reasoning message, apart from the text."""
    script = [
        ScriptedReply(tool_calls=(ToolCall("add", {"a": 1, "b": 1}),), thinking="Add them."),
        ScriptedReply("It is two.", thinking="The tool said 2."),
    ]
    async with openai_server(script, chunk_size=4, require_thinking=True) as server:
        async with Branch(chat_model=_thinking_model(server), tools=[add]) as branch:
            async with pride.stream(branch, Run("1 + 1?", tools=True)) as items:
                seen = [item async for item in items]
    assert server.refusals == []
    text = "".join(item for item in seen if isinstance(item, str))
    assert text == "It is two."
    thought = "".join(item.text for item in seen if isinstance(item, ReasoningDelta))
    assert thought == "Add them.The tool said 2."
    names = [type(item).__name__ for item in seen if not isinstance(item, str | ReasoningDelta)]
    assert names == [
        "Instruction",
        "Reasoning",
        "ActionRequest",
        "ActionResponse",
        "Reasoning",
        "AssistantResponse",
    ]
    last_delta = max(i for i, item in enumerate(seen) if isinstance(item, ReasoningDelta))
    first_text = min(i for i, item in enumerate(seen) if isinstance(item, str))
    assert last_delta < first_text


async def test_thinking_is_stored_restored_and_continued(tmp_path: Path) -> None:
    """A conversation with thinking in a real SQLite store comes back with its blocks, which
    the next turn sends back: the server verifies the signatures it made before the restart."""
    path = tmp_path / "store.db"
    script = [
        ScriptedReply(tool_calls=(ToolCall("add", {"a": 2, "b": 2}),), thinking="Add."),
        ScriptedReply("four", thinking="Done."),
        ScriptedReply(tool_calls=(ToolCall("mul", {"a": 4, "b": 3}),), thinking="Times 3."),
        ScriptedReply("twelve", thinking="Done again."),
    ]
    async with openai_server(script, require_thinking=True) as server:
        async with Session(store=path) as session:
            first = await session.spawn(
                Branch(name="calc", chat_model=_thinking_model(server), tools=[add, mul])
            )
            await pride.ask(first, Run("2 + 2?", tools=True))
            before = [m for m in first.messages if isinstance(m, Reasoning)]
        async with Session(store=path) as session:
            second = await session.spawn(
                Branch(name="calc", chat_model=_thinking_model(server), tools=[add, mul])
            )
            restored = [m for m in second.messages if isinstance(m, Reasoning)]
            assert restored == before
            projected = Branch.from_dict(second.to_dict()).messages
            assert [m for m in projected if isinstance(m, Reasoning)] == before
            await pride.ask(second, Run("and times 3?", tools=True))
    assert server.refusals == []
    assert kinds(second.messages).count("Reasoning") == 4
    last = server.requests[-1].body["messages"]
    old = [b for m in last if m["role"] == "assistant" for b in m["content"]]
    assert [b["thinking"] for b in old if b["type"] == "thinking"] == ["Add.", "Done.", "Times 3."]


async def test_a_turn_resumed_after_approval_sends_its_journaled_thinking_back(
    tmp_path: Path,
) -> None:
    """The journal keeps the reply's thinking: the resumed loop's next call carries the
    signed block (the server verifies it), and a resumed stream shows it as its own item."""
    script = [
        ScriptedReply(tool_calls=(ToolCall("add", {"a": 1, "b": 2}, "toolu_ok"),), thinking="Add."),
        ScriptedReply("three", thinking="It said 3."),
    ]
    async with openai_server(script, require_thinking=True) as server:
        async with Session(store=tmp_path / "store.db") as session:
            branch = await session.spawn(
                Branch(
                    name="careful",
                    chat_model=_thinking_model(server),
                    tools=[pride.Tool(add, requires_approval=True)],
                )
            )
            try:
                await pride.ask(branch, Run("1 + 2?", tools=True))
            except ApprovalRequired as stopped:
                suspended = stopped
            result = await session.resolve(suspended.turn_id, {"toolu_ok": Approve()})
    assert server.refusals == []
    assert server.request_count == 2  # the first reply came from the journal, not a new call
    assert result[-1].assistant_response == "three"
    assert [m.reasoning for m in branch.messages if isinstance(m, Reasoning)] == [
        "Add.",
        "It said 3.",
    ]
    resumed = server.requests[-1].body["messages"]
    assert [b["type"] for b in resumed[1]["content"]] == ["thinking", "tool_use"]


async def test_a_scripted_model_thinks_for_no_provider() -> None:
    """A ScriptedModel's thinking is recorded and streamed, and renders for no provider."""
    model = ScriptedModel([ScriptedReply("ok", thinking="Pondering.", redacted="hush")])
    async with Branch(chat_model=model) as branch:
        async with pride.stream(branch, Run("hm?")) as items:
            seen = [item async for item in items]
    assert "".join(i.text for i in seen if isinstance(i, ReasoningDelta)) == "Pondering."
    blocks = [m for m in branch.messages if isinstance(m, Reasoning)]
    assert [(b.provider, b.reasoning, b.encrypted) for b in blocks] == [
        ("scripted", "Pondering.", None),
        ("scripted", "", "hush"),
    ]
    assert all(b.to_anthropic() is None and b.to_openai() is None for b in blocks)


async def test_a_scripted_models_thinking_counts_as_output() -> None:
    """Reasoning is generated, so its estimate counts as output tokens, as a provider bills it."""
    plain = ScriptedModel([ScriptedReply("ok")])
    thinking = ScriptedModel([ScriptedReply("ok", thinking="a long chain of thought " * 10)])
    request = pride.llm.ModelRequest([{"role": "user", "content": "hm?"}])
    quiet, loud = await plain.invoke(request), await thinking.invoke(request)
    assert loud.usage.output_tokens > quiet.usage.output_tokens + 50
    # ... and as the part of them spent reasoning, as a provider reports it.
    spent = pride.llm.estimate_text_tokens("a long chain of thought " * 10)
    assert (quiet.usage.reasoning_tokens, loud.usage.reasoning_tokens) == (0, spent)
    assert loud.usage.output_tokens == quiet.usage.output_tokens + spent


@pytest.mark.parametrize("thinking", ["Nothing to add.", ""], ids=["thinking", "plain"])
async def test_a_reply_without_text_is_continued_without_an_empty_text_block(
    thinking: str,
) -> None:
    """A reply of reasoning alone (or of nothing: Claude may end a turn empty) is
    recorded, and the next request carries its thinking but no empty text block,
    which the API refuses (``text content blocks must be non-empty``)."""
    script = [ScriptedReply("", thinking=thinking), ScriptedReply("ok")]
    async with openai_server(script, require_thinking=bool(thinking)) as server:
        model = (
            _thinking_model(server)
            if thinking
            else iModel(
                "anthropic/claude-sonnet-4-5", base_url=server.base_url, api_key="sk-ant-test"
            )
        )
        async with Branch(chat_model=model) as branch:
            assert await pride.ask(branch, Communicate("think")) == ""
            assert await pride.ask(branch, Communicate("again")) == "ok"
    assert server.refusals == []
    sent = server.requests[-1].body["messages"]
    blocks = [b for m in sent if isinstance(m["content"], list) for b in m["content"]]
    assert [b for b in blocks if b["type"] == "text" and not b["text"]] == []
    assert all(m["content"] for m in sent)
    assert [b["thinking"] for b in blocks if b["type"] == "thinking"] == [thinking] * bool(thinking)


@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])
async def test_a_model_that_only_thinks_is_stopped_by_max_output_tokens(streamed: bool) -> None:
    """Thinking is output: a reply of thinking alone past ``max_output_tokens`` fails
    the turn with a BudgetExceeded naming the limit, counted once (a stream is cut
    as soon as its reasoning deltas pass the limit, so it spent little more)."""
    reply = ScriptedReply("", thinking="hmm " * 2000, usage=None)
    async with openai_server([reply], require_thinking=True) as server:
        budget = pride.Budget(max_output_tokens=100)
        async with Branch(chat_model=_thinking_model(server), budget=budget) as branch:
            with pytest.raises(pride.BudgetExceeded) as caught:
                if streamed:
                    async with pride.stream(branch, Run("think")) as items:
                        async for _ in items:
                            pass
                else:
                    await pride.ask(branch, Communicate("think"))
    assert (caught.value.limit, caught.value.allowed) == ("max_output_tokens", 100)
    assert caught.value.used == branch.usage.output_tokens > 100
    assert branch.usage.model_calls == 1 and server.request_count == 1
    if streamed:
        assert caught.value.used < 200  # cut, not read to its end (about 2,000)
    assert not [m for m in branch.messages if isinstance(m, Reasoning)]  # nothing recorded
