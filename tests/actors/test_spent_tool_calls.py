"""A stream cut while the model writes a tool call's arguments counts them.

A model that answers with a tool call streams its arguments as pieces that
no consumer sees (the call is whole only at the end), yet the provider bills
them as generated tokens. Before, a stream cut then counted nothing: a client
cancelling each turn while the model wrote its arguments spent without limit
under a session's token or cost budget. These tests cut such streams on the
real loopback provider, in each wire format, and on the scripted model.
"""

from __future__ import annotations

import contextlib
import json

import pytest
import trio
import trio.testing

import pride
from pride import Branch, Budget, BudgetExceeded, Chat, ScriptedModel, Session
from pride.llm import (
    ModelRequest,
    RetryPolicy,
    ScriptedReply,
    ToolCall,
    estimate_text_tokens,
    iModel,
)
from pride.testing import Fault, openai_server

#: Arguments long enough that their two streamed halves weigh far more than a
#: tool call's head: 100 estimated tokens or so each.
ARGUMENTS = {"text": "abcdefgh" * 100}
CALL = ToolCall("note", ARGUMENTS, id="call_1")
HALF_TOKENS = estimate_text_tokens(json.dumps(ARGUMENTS)[: len(json.dumps(ARGUMENTS)) // 2])
TOOLS = [{"name": "note", "parameters": {"type": "object"}}]

#: Per wire format: the model's settings and how many events the stall lets
#: through, the last of them the arguments' second half.
WIRES = {
    "openai": ("openai/gpt-4o-mini", {}, 4),  # role, call head, two halves
    "anthropic": ("anthropic/claude-3-5-haiku-latest", {}, 4),  # start, block start, halves
    # created, in_progress, item added, two halves
    "responses": ("openai/gpt-4o-mini", {"openai_api": "responses"}, 5),
}


def request() -> ModelRequest:
    return ModelRequest(messages=[{"role": "user", "content": "take a note"}], tools=TOOLS)


async def cut_after_arguments(model: iModel) -> pride.Usage | None:
    """Stream a tool call whose provider stalls after its arguments, cancel once
    the arguments are in, and return what the stream counted."""
    stream = model.stream(request())
    with trio.CancelScope() as cancel:
        async with trio.open_nursery() as nursery:

            async def read() -> None:
                async with stream:
                    async for _delta in stream:
                        raise AssertionError("a tool call's arguments are no text delta")

            nursery.start_soon(read)
            await trio.testing.wait_all_tasks_blocked()  # the stall: every piece read
            cancel.cancel()
    return stream.usage


@pytest.mark.parametrize("wire", sorted(WIRES))
async def test_a_stream_cut_in_a_tool_calls_arguments_counts_them(wire: str) -> None:
    """A stream cut while the model writes a tool call's arguments counts them as
    output, in each wire format."""
    name, settings, events = WIRES[wire]
    async with openai_server([Fault.stall_stream(after_chunks=events, reply=CALL)]) as server:
        model = iModel(name, base_url=server.base_url, api_key="test", **settings)
        spent = await cut_after_arguments(model)
        statistics = model.statistics()
    assert spent is not None, "the arguments counted nothing"
    assert spent.input_tokens > 0
    assert 2 * HALF_TOKENS - 1 <= spent.output_tokens <= 2 * HALF_TOKENS + 1
    assert spent.cost_usd is not None and spent.cost_usd > 0
    assert statistics.usage.output_tokens == spent.output_tokens
    assert statistics.in_flight == 0


async def test_tool_call_streams_cut_again_and_again_spend_a_shared_budget_until_it_refuses() -> (
    None
):
    """Before, each cut stream counted nothing: a client cancelling every turn
    while the model wrote a tool call's arguments spent without limit."""

    async def ask(branch: Branch) -> None:
        # The stream that passes the allowance in its arguments is cut there.
        with contextlib.suppress(BudgetExceeded):
            async with pride.stream(branch, Chat("take a note")) as items:
                async for _item in items:
                    pass

    script = lambda body: Fault.stall_stream(after_chunks=4, reply=CALL)  # noqa: E731
    async with openai_server(script) as server:
        model = iModel("openai/gpt-4o-mini", base_url=server.base_url, api_key="test")
        async with Session(budget=Budget(max_output_tokens=500)) as session:
            branch = await session.spawn(Branch(name="noter", chat_model=model))
            for _ask in range(10):
                with trio.CancelScope() as cancel:
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(ask, branch)
                        await trio.testing.wait_all_tasks_blocked()  # in the stall
                        cancel.cancel()  # the client gives up on the turn
                if session.usage.output_tokens > 500:
                    break
            assert session.usage.output_tokens > 500, session.usage
            assert server.request_count < 10
            with pytest.raises(BudgetExceeded) as refused:
                await session.ask("noter", Chat("one more"))
            assert refused.value.limit == "max_output_tokens"
            assert server.request_count == session.usage.model_calls
            assert branch.usage.output_tokens == session.usage.output_tokens


async def test_a_scripted_stream_cut_in_a_tool_calls_arguments_counts_what_it_wrote() -> None:
    """The scripted model streams a tool call's arguments in ``chunk_size`` pieces
    after its text, as a provider does; cut between pieces, it counts those written."""
    reply = ScriptedReply(text="ok", tool_calls=(CALL,))
    model = ScriptedModel([reply], chunk_size=100)
    stream = model.stream(request())
    async with stream:
        assert await stream.__anext__() == "ok"
        with trio.CancelScope() as cancel:
            cancel.cancel()  # lands on the checkpoint after the first piece
            await stream.__anext__()
        assert cancel.cancelled_caught
    spent = stream.usage
    assert spent is not None
    first = json.dumps(ARGUMENTS)[:100]
    assert spent.output_tokens == estimate_text_tokens("ok") + estimate_text_tokens(first)
    assert model.statistics().usage.output_tokens == spent.output_tokens


async def test_a_stream_cut_in_its_arguments_alone_is_still_retried_and_counts_its_reply() -> None:
    """No consumer saw the arguments, so a stream cut in them is retried as one cut
    before its first delta is; the retry's reply counts its own usage only."""
    retry = RetryPolicy(max_retries=1, base_delay=0.0, jitter=0.0)
    async with openai_server([Fault.cut_stream(after_chunks=4, reply=CALL), CALL]) as server:
        model = iModel("openai/gpt-4o-mini", base_url=server.base_url, api_key="t", retry=retry)
        stream = model.stream(request())
        async with stream:
            async for _delta in stream:
                raise AssertionError("a tool call's arguments are no text delta")
        assert server.request_count == 2
    assert [call.arguments for call in stream.response.tool_calls] == [ARGUMENTS]
    assert stream.usage == stream.response.usage
    assert model.statistics().usage.output_tokens == stream.response.usage.output_tokens


async def test_a_streamed_tool_call_s_arguments_are_cut_at_max_output_tokens() -> None:
    """A turn's ``max_output_tokens`` cuts a stream that writes a tool call's
    arguments the moment they pass it, as it cuts text: before, only text and
    reasoning deltas were held to it, and a model streaming a huge argument ran
    on to the end of its reply (here about 200 tokens against an allowance of 30)."""
    reply = ScriptedReply(tool_calls=(CALL,))
    model = ScriptedModel([reply], chunk_size=100)  # ~25 tokens a piece, 9 pieces
    piece = estimate_text_tokens(json.dumps(ARGUMENTS)[:100])
    whole = estimate_text_tokens(json.dumps(ARGUMENTS))
    async with Branch(chat_model=model, budget=Budget(max_output_tokens=30)) as branch:
        with pytest.raises(BudgetExceeded) as refused:
            async with pride.stream(branch, Chat("take a note")) as items:
                async for _item in items:
                    raise AssertionError("a tool call's arguments are no item of the turn")
    assert refused.value.limit == "max_output_tokens"
    assert refused.value.used == 2 * piece < whole  # cut at the second piece
    assert branch.usage.output_tokens == 2 * piece
    assert model.statistics().usage.output_tokens == 2 * piece


async def test_an_anthropic_tool_call_whose_input_opens_its_block_counts_it() -> None:
    """Anthropic may send a tool call's whole input in its ``content_block_start``
    rather than as ``input_json_delta`` pieces; a stream cut after it counts that
    input as generated, as it counts the pieces. Before, it counted nothing."""
    block = {"type": "tool_use", "id": "toolu_1", "name": "note", "input": ARGUMENTS}
    events = [
        {"type": "message_start", "message": {"model": "claude", "usage": {"input_tokens": 5}}},
        {"type": "content_block_start", "index": 0, "content_block": block},
    ]
    body = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
    fault = Fault.raw(body, content_type="text/event-stream")  # ends without message_stop
    async with openai_server([fault]) as server:
        model = iModel(
            "anthropic/claude-3-5-haiku-latest",
            base_url=server.base_url,
            api_key="test",
            retry=RetryPolicy.never(),
        )
        stream = model.stream(request())
        with pytest.raises(pride.ProviderError):
            async with stream:
                async for _delta in stream:
                    raise AssertionError("a tool call's input is no text delta")
    spent = stream.usage
    assert spent is not None
    assert spent.output_tokens == estimate_text_tokens(json.dumps(ARGUMENTS))
