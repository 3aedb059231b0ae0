"""A stream that ends before its reply still counts what it spent.

The provider bills the prompt it read and every token it generated, whether or
not anyone read them, and a reply cut short never reports its usage. These
tests leave streams early in each way a turn can (the consumer leaves, the
caller is cancelled, the provider cuts the connection, the budget cuts the
stream) against a real loopback provider, and check that the turn, the
branch, the session's budget and the model's own statistics count pride's
estimate of it (`pride.llm.ModelStream.usage`).
"""

from __future__ import annotations

import socket

import pytest
import trio
import trio.testing

import pride
from pride import (
    Branch,
    Budget,
    BudgetExceeded,
    Chat,
    Run,
    RunEnd,
    RunFailed,
    ScriptedModel,
    Session,
)
from pride.errors import BadRequest, ProviderConnectionError
from pride.llm import ModelRequest, RetryPolicy, estimate_text_tokens, iModel
from pride.testing import Fault, openai_server
from tests.helpers import Recorder

#: A long reply, 8 characters an event: 2 estimated tokens each.
REPLY = "abcdefgh" * 200


def provider(server: object) -> iModel:
    return iModel("openai/gpt-4o-mini", base_url=server.base_url, api_key="test")  # type: ignore[attr-defined]


async def leave_after(branch: Branch, chunks: int, command: object | None = None) -> list[str]:
    """Stream ``command`` on ``branch`` and leave after ``chunks`` text chunks."""
    received: list[str] = []
    async with pride.stream(branch, command or Chat("tell me everything")) as items:
        async for item in items:
            if isinstance(item, str):
                received.append(item)
                if len(received) == chunks:
                    break
    return received


async def test_a_stream_the_consumer_leaves_counts_its_prompt_and_what_it_received() -> None:
    recorder = Recorder()
    async with openai_server([REPLY]) as server:
        model = provider(server)
        async with Branch(chat_model=model, observer=recorder) as branch:
            received = await leave_after(branch, 5)
            usage = branch.usage
    output = sum(estimate_text_tokens(chunk) for chunk in received)
    assert received == ["abcdefgh"] * 5
    assert usage.model_calls == 1
    assert usage.input_tokens > 0
    # What reached the turn: the five delivered chunks, and any the model's
    # reader had taken in before the consumer's leaving reached it.
    assert output <= usage.output_tokens <= output + 2 * estimate_text_tokens("abcdefgh")
    assert usage.cost_usd is not None and usage.cost_usd > 0  # priced as gpt-4o-mini
    ended = [signal for signal in recorder.signals if isinstance(signal, RunEnd | RunFailed)]
    assert [(s.usage.input_tokens, s.usage.output_tokens) for s in ended] == [
        (usage.input_tokens, usage.output_tokens)
    ]
    statistics = model.statistics()
    assert statistics.usage.input_tokens == usage.input_tokens
    assert statistics.usage.output_tokens == usage.output_tokens
    assert statistics.in_flight == 0


async def test_streams_left_early_spend_a_shared_budget_until_it_refuses() -> None:
    """Before, each abandoned stream counted nothing: a client leaving every
    stream after a few chunks spent without limit under a session budget."""
    async with openai_server(lambda body: REPLY) as server:
        async with Session(budget=Budget(max_output_tokens=40)) as session:
            branch = await session.spawn(Branch(name="talker", chat_model=provider(server)))
            refused: BudgetExceeded | None = None
            for _attempt in range(20):
                try:
                    await leave_after(branch, 4)
                except BudgetExceeded as exc:
                    refused = exc
                    break
            assert refused is not None, session.usage
            assert refused.limit == "max_output_tokens" and refused.scope.startswith("session")
            assert session.usage.output_tokens > 40
            assert server.request_count == session.usage.model_calls < 20


async def test_a_stream_cancelled_by_its_caller_counts_what_it_spent() -> None:
    async with openai_server([Fault.stall_stream(after_chunks=3, reply=REPLY)]) as server:
        async with Branch(chat_model=provider(server)) as branch:
            received: list[str] = []
            with trio.CancelScope() as cancel:
                async with pride.stream(branch, Chat("q")) as items:
                    async for item in items:
                        received.append(item)
                        if len(received) == 2:  # the third event was the role's
                            cancel.cancel()  # the provider sends no more: the caller gives up
            assert cancel.cancelled_caught
            usage = branch.usage
    assert usage.input_tokens > 0
    assert usage.output_tokens == 2 * estimate_text_tokens("abcdefgh")


async def test_a_stream_the_provider_cuts_counts_what_it_delivered() -> None:
    async with openai_server([Fault.cut_stream(after_chunks=4, reply=REPLY)]) as server:
        model = provider(server)
        async with Branch(chat_model=model) as branch:
            with pytest.raises(ProviderConnectionError):
                await leave_after(branch, 100)
            usage = branch.usage
    assert usage.input_tokens > 0
    assert usage.output_tokens == 3 * estimate_text_tokens("abcdefgh")  # the first event: the role
    assert model.statistics().failures == 1
    assert model.statistics().usage.output_tokens == usage.output_tokens


async def test_a_stream_cut_by_max_output_tokens_counts_its_prompt_and_the_figure_it_names() -> (
    None
):
    async with openai_server([REPLY]) as server:
        async with Branch(chat_model=provider(server)) as branch:
            with pytest.raises(BudgetExceeded) as info:
                await leave_after(branch, 1000, Run("q", budget=Budget(max_output_tokens=20)))
            usage = branch.usage
    assert info.value.limit == "max_output_tokens" and info.value.used > 20
    assert usage.output_tokens == info.value.used  # counted once, as the error says
    assert usage.input_tokens > 0


async def test_a_scripted_stream_ended_before_its_first_delta_counts_its_prompt(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The script gave its reply and the model is at work (its delay): the prompt
    was read. Before, nothing was counted until the first delta."""
    model = ScriptedModel([REPLY], delay=60.0)
    async with Branch(chat_model=model) as branch:
        with trio.move_on_after(1.0) as waited:
            await leave_after(branch, 1)
        assert waited.cancelled_caught
        await trio.testing.wait_all_tasks_blocked()  # the branch has ended the turn
        assert branch.usage.input_tokens > 0 and branch.usage.output_tokens == 0
        assert branch.usage.model_calls == 1


async def test_a_stream_cancelled_before_its_first_delta_counts_its_prompt() -> None:
    """The provider holds the stream's first byte (a reasoning model thinking, say);
    the caller gives up. Before, nothing was counted: a client cancelling every
    streamed turn before its first token spent without limit under a budget."""
    async with openai_server([Fault.slow_first_byte(60.0, REPLY)]) as server:
        model = provider(server)
        async with Branch(chat_model=model) as branch:
            with trio.CancelScope() as cancel:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(leave_after, branch, 1)
                    await trio.testing.wait_all_tasks_blocked()  # the provider holds it
                    cancel.cancel()
            await trio.testing.wait_all_tasks_blocked()  # the branch has ended the turn
            usage = branch.usage
    assert usage.input_tokens > 0 and usage.output_tokens == 0
    assert usage.cost_usd is not None and usage.cost_usd > 0
    assert model.statistics().usage.input_tokens == usage.input_tokens


async def test_a_stream_that_could_not_connect_or_was_refused_counts_nothing() -> None:
    """Nothing reached the provider, or the provider refused it unrun (an error
    status): no prompt was read, none is counted."""
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    retry = RetryPolicy(max_retries=0)
    nowhere = iModel(
        "openai/gpt-4o-mini", base_url=f"http://127.0.0.1:{port}/v1", api_key="t", retry=retry
    )
    async with Branch(chat_model=nowhere) as branch:
        with pytest.raises(ProviderConnectionError):
            await leave_after(branch, 1)
        assert branch.usage.input_tokens == 0
    async with openai_server([Fault.status(400)]) as server:
        async with Branch(chat_model=provider(server)) as branch:
            with pytest.raises(BadRequest):
                await leave_after(branch, 1)
            assert branch.usage.input_tokens == 0


async def test_model_stream_usage_is_the_replys_once_read_to_its_end() -> None:
    async with openai_server(["short reply"]) as server:
        model = provider(server)
        stream = model.stream(ModelRequest(messages=[{"role": "user", "content": "q"}]))
        assert stream.usage is None
        async with stream:
            async for _delta in stream:
                pass
        assert stream.usage == stream.response.usage


async def test_model_stream_usage_read_mid_stream_grows_until_the_stream_is_left() -> None:
    async with openai_server([REPLY]) as server:
        model = provider(server)
        per_delta = estimate_text_tokens("abcdefgh")
        async with model.stream(ModelRequest(messages=[{"role": "user", "content": "q"}])) as s:
            deltas = 0
            async for _delta in s:
                deltas += 1
                spent = s.usage
                assert spent is not None and spent.output_tokens == deltas * per_delta
                if deltas == 4:
                    break
        assert s.usage is not None and s.usage.output_tokens == 4 * per_delta
        assert model.statistics().usage.output_tokens == 4 * per_delta


async def test_a_flow_budget_cutting_a_streaming_node_counts_the_cut_stream_once() -> None:
    """A flow's ``max_output_tokens`` cuts a streaming node's reply (``items=True``):
    the node fails with BudgetExceeded naming the flow's figure, and that figure is
    what the node, the flow, the branch and the session each count: once, not once
    for the cut and again for what the stream spent. The next flow on the same
    session is a fresh allowance and completes."""
    async with openai_server([REPLY, "short"]) as server:
        async with Session() as session:
            branch = await session.spawn(Branch(name="talker", chat_model=provider(server)))
            flow = pride.Flow()
            flow.add("talker", Run("tell me everything"), name="story")
            async with session.flow_stream(
                flow, budget=Budget(max_output_tokens=20), items=True
            ) as events:
                async for _event in events:
                    pass
            result = events.result
            assert result is not None
            assert result.outcomes == {"story": "failed"}
            error = result.errors["story"]
            assert isinstance(error, BudgetExceeded), error
            assert error.limit == "max_output_tokens" and error.used > 20
            assert result.nodes["story"].usage.output_tokens == error.used
            assert result.usage.output_tokens == error.used
            assert branch.usage.output_tokens == error.used
            assert session.usage.output_tokens == error.used
            assert branch.usage.input_tokens > 0
            short = pride.Flow()
            short.add("talker", Chat("again"), name="again")
            assert (await session.flow(short, budget=Budget(max_output_tokens=20)))["again"]


async def test_a_stream_read_to_its_end_counts_the_reply_s_usage_once() -> None:
    """A streamed reply read to its end counts what the provider reported, once, the
    same as the reply asked for unstreamed: the estimate is only for streams that end
    before their reply (it must never add to a reply's own figures)."""
    async with openai_server([REPLY, REPLY]) as server:
        model = provider(server)
        async with Branch(chat_model=model) as branch:
            await leave_after(branch, 10_000)  # to its end
            streamed = branch.usage
            await branch.chat("tell me everything")
            both = branch.usage
    assert streamed.model_calls == 1 and both.model_calls == 2
    assert streamed.output_tokens > 0
    assert both.output_tokens == 2 * streamed.output_tokens
    assert both.input_tokens == 2 * streamed.input_tokens
    assert model.statistics().usage.output_tokens == both.output_tokens


async def test_a_retried_stream_left_early_counts_only_the_attempt_that_streamed() -> None:
    """A 503 before any delta is retried; the retry streams and its consumer leaves:
    one call's estimate is counted (the failed attempt sent nothing and is billed
    nothing), the budget's model call is counted once, and the model's statistics
    agree with the turn."""
    retry = RetryPolicy(max_retries=1, base_delay=0.0, jitter=0.0)
    async with openai_server([Fault.status(503), REPLY]) as server:
        model = iModel("openai/gpt-4o-mini", base_url=server.base_url, api_key="test", retry=retry)
        async with Branch(chat_model=model) as branch:
            received = await leave_after(branch, 5)
            usage = branch.usage
        assert server.request_count == 2
    output = sum(estimate_text_tokens(chunk) for chunk in received)
    assert usage.model_calls == 1
    assert output <= usage.output_tokens <= output + 2 * estimate_text_tokens("abcdefgh")
    assert model.statistics().usage.output_tokens == usage.output_tokens
    assert model.statistics().usage.input_tokens == usage.input_tokens
