"""A plain (unstreamed) call that ends without a reply after its request was
sent counts the request's tokens.

The provider bills the prompt it read whether or not its reply arrives. Before,
a plain call cancelled in flight counted nothing: a client cancelling each
turn while the model worked spent without limit under a session's token or
cost budget. Sent means the request's body was written whole (httpcore's
trace); a request that failed to connect, or that the provider refused with
an error status, spent nothing. These tests use the real loopback provider.
"""

from __future__ import annotations

import socket

import pytest
import trio
import trio.testing

import pride
from pride import Branch, Budget, BudgetExceeded, Chat, ScriptedModel, Session
from pride.errors import AuthenticationFailed, BadRequest, ProviderConnectionError
from pride.llm import RetryPolicy, iModel
from pride.testing import Fault, openai_server

NO_RETRY = RetryPolicy(max_retries=0)
ONE_RETRY = RetryPolicy(max_retries=1, base_delay=0.0, jitter=0.0)


def provider(server: object, retry: RetryPolicy = NO_RETRY) -> iModel:
    base_url = server.base_url  # type: ignore[attr-defined]
    return iModel("openai/gpt-4o-mini", base_url=base_url, api_key="test", retry=retry)


def nowhere() -> iModel:
    """A model whose provider is a port nothing listens on (its connection is refused)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return iModel(
        "openai/gpt-4o-mini", base_url=f"http://127.0.0.1:{port}/v1", api_key="t", retry=NO_RETRY
    )


async def cancel_in_flight(branch: Branch) -> None:
    """Ask ``branch`` and cancel the ask while the provider holds its reply."""
    with trio.CancelScope() as cancel:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(branch.chat, "tell me everything")
            await trio.testing.wait_all_tasks_blocked()  # the provider holds the reply
            cancel.cancel()
    assert cancel.cancelled_caught
    await trio.testing.wait_all_tasks_blocked()  # the branch has ended the cancelled turn


async def test_a_plain_call_cancelled_in_flight_counts_its_request() -> None:
    """A call cancelled while the provider holds its reply counts its prompt, priced, on
    the branch and the model."""
    async with openai_server([Fault.slow_first_byte(60.0, "late")]) as server:
        model = provider(server)
        async with Branch(chat_model=model) as branch:
            await cancel_in_flight(branch)
            usage = branch.usage
        statistics = model.statistics()
    assert server.request_count == 1
    assert usage.model_calls == 1
    assert usage.input_tokens > 0 and usage.output_tokens == 0
    assert usage.cost_usd is not None and usage.cost_usd > 0  # priced as gpt-4o-mini
    assert statistics.usage.input_tokens == usage.input_tokens
    assert statistics.in_flight == 0


async def test_plain_calls_cancelled_again_and_again_spend_a_shared_budget_until_it_refuses() -> (
    None
):
    """Before, each cancelled call counted nothing: the budget never refused."""
    async with openai_server(lambda body: Fault.slow_first_byte(60.0, "late")) as server:
        async with Session(budget=Budget(max_input_tokens=20)) as session:
            branch = await session.spawn(Branch(name="talker", chat_model=provider(server)))
            for _ask in range(10):
                await cancel_in_flight(branch)
                if session.usage.input_tokens > 20:
                    break
            assert session.usage.input_tokens > 20, session.usage
            with pytest.raises(BudgetExceeded) as refused:
                await session.ask("talker", Chat("one more"))
            assert refused.value.limit == "max_input_tokens"
            assert refused.value.scope.startswith("session")
            assert server.request_count == session.usage.model_calls < 10


async def test_a_plain_call_that_could_not_connect_counts_no_tokens() -> None:
    """A call to a port nothing listens on never sent its request: no tokens, and no model call."""
    model = nowhere()
    async with Branch(chat_model=model) as branch:
        with pytest.raises(ProviderConnectionError):
            await branch.chat("q")
        usage = branch.usage
    assert usage.model_calls == 0  # never sent: no call was made
    assert usage.input_tokens == usage.output_tokens == 0
    assert model.statistics().usage.input_tokens == 0


async def test_a_plain_call_the_provider_refused_counts_no_tokens() -> None:
    """A call refused with an error status (a 400) was not run: no tokens, and no model call."""
    async with openai_server([Fault.status(400)]) as server:
        async with Branch(chat_model=provider(server)) as branch:
            with pytest.raises(BadRequest):
                await branch.chat("q")
            assert branch.usage.input_tokens == 0
            assert branch.usage.model_calls == 0  # refused, not run


async def test_a_plain_call_cut_after_sending_counts_its_request_once_however_often_sent() -> None:
    """A call whose sent attempts were each cut counts its prompt once, however many were sent."""
    async with openai_server([Fault.cut_stream()]) as once:
        async with Branch(chat_model=provider(once)) as branch:
            with pytest.raises(ProviderConnectionError):
                await branch.chat("q")
            cut_once = branch.usage
    async with openai_server([Fault.cut_stream(), Fault.cut_stream()]) as twice:
        model = provider(twice, ONE_RETRY)
        async with Branch(chat_model=model) as branch:
            with pytest.raises(ProviderConnectionError):
                await branch.chat("q")
            cut_twice = branch.usage
        assert twice.request_count == 2
    assert cut_once.input_tokens > 0
    assert cut_twice == cut_once  # one call, its prompt once
    assert model.statistics().usage.input_tokens == cut_once.input_tokens


async def test_a_plain_call_retried_to_its_reply_counts_only_the_reply() -> None:
    """A call retried to its reply counts the reply's usage alone, not the cut
    attempt's prompt on top."""
    async with openai_server(["ok"]) as plain:
        async with Branch(chat_model=provider(plain)) as branch:
            await branch.chat("q")
            answered = branch.usage
    async with openai_server([Fault.cut_stream(), "ok"]) as server:
        model = provider(server, ONE_RETRY)
        async with Branch(chat_model=model) as branch:
            await branch.chat("q")
            retried = branch.usage
        assert server.request_count == 2
    assert retried == answered  # the cut attempt's prompt is not counted on top
    assert model.statistics().usage.input_tokens == answered.input_tokens


async def test_a_scripted_call_cancelled_while_it_works_counts_its_request(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A scripted call cancelled during its ``delay`` (the model at work) counts its prompt."""
    model = ScriptedModel(["late"], delay=60.0)
    async with Branch(chat_model=model) as branch:
        with trio.move_on_after(1.0):
            await branch.chat("tell me everything")
        await trio.testing.wait_all_tasks_blocked()  # the branch has ended the cancelled turn
        assert branch.usage.input_tokens > 0 and branch.usage.output_tokens == 0
        assert model.statistics().usage.input_tokens == branch.usage.input_tokens


async def _ask(branch: Branch, *, streamed: bool) -> None:
    if not streamed:
        await branch.chat("q")
        return
    async with pride.stream(branch, Chat("q")) as items:
        async for _item in items:
            pass


@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])
async def test_a_call_refused_before_it_was_sent_is_no_model_call(
    streamed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call refused for want of an API key never left: it spent nothing, and is
    no model call on the branch, the session or their budgets, as its tokens are
    none (a call counts once its request was sent). Before, it was counted: under
    a session's ``max_model_calls=1`` the key set after it found the allowance spent."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    async with openai_server(["answered"]) as server:
        model = iModel("openai/gpt-4o-mini", base_url=server.base_url, retry=NO_RETRY)
        async with Session(budget=Budget(max_model_calls=1)) as session:
            branch = await session.spawn(Branch(name="keyless", chat_model=model))
            with pytest.raises(AuthenticationFailed, match="OPENAI_API_KEY"):
                await _ask(branch, streamed=streamed)
            assert branch.usage.model_calls == session.usage.model_calls == 0
            monkeypatch.setenv("OPENAI_API_KEY", "test")
            await _ask(branch, streamed=streamed)  # the one call the budget allows
            assert session.usage.model_calls == 1
        assert server.request_count == 1


@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])
async def test_model_statistics_count_the_calls_never_sent_apart(
    streamed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``model.statistics()`` counted a call refused for want of a key, refused with
    an error status, or that could not connect among its calls, and nothing said it
    never reached the provider: its calls disagreed with ``branch.usage.model_calls``,
    which counts none of them. ``unsent`` counts them: ``calls - unsent`` are the
    calls the provider ran, once none is in flight."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    async with openai_server([Fault.status(400), "answered"]) as server:
        model = iModel("openai/gpt-4o-mini", base_url=server.base_url, retry=NO_RETRY)
        async with Branch(chat_model=model) as branch:
            with pytest.raises(AuthenticationFailed):
                await _ask(branch, streamed=streamed)
            monkeypatch.setenv("OPENAI_API_KEY", "test")
            with pytest.raises(BadRequest):
                await _ask(branch, streamed=streamed)
            await _ask(branch, streamed=streamed)
            usage = branch.usage
    statistics = model.statistics()
    assert (statistics.calls, statistics.unsent, statistics.failures) == (3, 2, 2)
    assert statistics.calls - statistics.unsent == usage.model_calls == 1
    unreachable = nowhere()
    async with Branch(chat_model=unreachable) as branch:
        with pytest.raises(ProviderConnectionError):
            await _ask(branch, streamed=streamed)
    assert (unreachable.statistics().calls, unreachable.statistics().unsent) == (1, 1)


async def test_a_call_cancelled_in_its_before_model_call_hook_is_no_model_call(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A call whose turn is cancelled while an asynchronous ``before_model_call``
    hook still runs (one asking a moderation service, say) never began: nothing
    was sent, so it is no model call on the branch, the session or their budgets.
    Before, it was counted: under ``max_model_calls=1`` the next call was refused."""
    hold = True

    async def moderate(payload: object) -> None:
        if hold:
            await trio.sleep_forever()

    model = ScriptedModel(["answered"])
    async with Session(budget=Budget(max_model_calls=1)) as session:
        ended = trio.Event()
        session.observe(pride.RunFailed, handler=lambda signal: ended.set())
        session.hooks.on("before_model_call", moderate)
        branch = await session.spawn(Branch(name="moderated", chat_model=model))
        with pytest.raises(trio.TooSlowError):
            await pride.ask(branch, Chat("q"), timeout=1.0)
        await ended.wait()  # the caller gave up; the turn is cancelled after it
        assert branch.usage.model_calls == session.usage.model_calls == 0
        hold = False
        assert await branch.chat("q") == "answered"  # the one call the budget allows
        assert session.usage.model_calls == 1
