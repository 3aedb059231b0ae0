"""Issue 36, items 2 and 4: usage figures a provider reports are hostile, and a turn
resumed from its journal counts each real call once.

The provider is the real loopback server, told to report whatever usage we like,
plain and streamed; durable turns keep their journal in a real SQLite store.
These run on the real clock (an autojump clock would jump during socket I/O).
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

import pride
from pride import Branch, Budget, BudgetExceeded, MalformedResponse, Session, iModel
from pride.llm import RetryPolicy, ScriptedReply, Usage as CallUsage, estimate_text_tokens
from pride.testing import Fault, openai_server


def _model(server: Any) -> iModel:
    return iModel(
        "openai/gpt-test",
        base_url=server.base_url,
        api_key="sk-test",
        retry=RetryPolicy(max_retries=0),
    )


async def _chat(branch: Branch, *, streamed: bool) -> None:
    """``branch.chat("hi")``, or the same command streamed to its end."""
    if streamed:
        async with pride.stream(branch, pride.Chat("hi")) as chunks:
            async for _ in chunks:
                pass
    else:
        await branch.chat("hi")


def _reply(cost: float | None = None, *, tokens_in: int = 10, tokens_out: int = 10) -> Any:
    return ScriptedReply(
        "ok", usage=CallUsage(tokens_in, tokens_out, cached_tokens=0, cost_usd=cost)
    )


# ------------------------------------------------------------ item 2: lying figures


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize(
    ("usage", "path"),
    [
        (CallUsage(10, 10, cached_tokens=0, cost_usd=-100.0), "usage.cost"),
        (CallUsage(10, 10, cached_tokens=0, cost_usd=-0.000001), "usage.cost"),
        (CallUsage(10, 10, cached_tokens=0, cost_usd=1e308), "usage.cost"),
        (CallUsage(-5, 10, cached_tokens=0, cost_usd=0.1), "usage.prompt_tokens"),
        (CallUsage(10, -5, cached_tokens=0, cost_usd=0.1), "usage.completion_tokens"),
        (
            CallUsage(10, 10, cached_tokens=-1, cost_usd=0.1),
            "usage.prompt_tokens_details.cached_tokens",
        ),
        (CallUsage(2**60, 10, cached_tokens=0, cost_usd=0.1), "usage.prompt_tokens"),
    ],
)
async def test_issue36_usage_a_budget_could_not_hold_is_a_malformed_response(
    usage: CallUsage, path: str, streamed: bool
) -> None:
    """A negative cost or count, a cost no call could have, a count past 2**53: the
    reply is a MalformedResponse naming the figure, and nothing of it is counted.
    A streamed reply's text came before its figures: that stream counts pride's
    estimate of what it spent (its prompt and "ok"), as any stream that fails
    after its first delta does; a plain reply, its prompt, as any plain call that
    fails after its request was sent does; and still nothing of the lie."""
    async with openai_server([ScriptedReply("ok", usage=usage)]) as server:
        async with Branch(chat_model=_model(server), budget=Budget(max_cost_usd=1.0)) as branch:
            with pytest.raises(MalformedResponse) as info:
                await _chat(branch, streamed=streamed)
            assert info.value.path is not None and info.value.path.endswith(path)
            used = branch.usage
    assert used.cost_usd is None
    if streamed:
        assert 0 < used.input_tokens < 100 and used.output_tokens == estimate_text_tokens("ok")
    else:
        assert 0 < used.input_tokens < 100 and used.output_tokens == 0


async def test_issue36_a_negative_cost_cannot_buy_more_calls_under_max_cost_usd() -> None:
    """The attack of the issue: a cost of -100, then 0.9 a reply, under a $1 session
    limit. The lie fails its call; the second honest call passes the limit and the
    session stops there (used > allowed), never 13 calls later."""
    script = [_reply(-100.0)] + [_reply(0.9) for _ in range(13)]
    async with openai_server(script) as server:
        async with Session(budget=Budget(max_cost_usd=1.0)) as session:
            branch = await session.spawn(Branch(name="a", chat_model=_model(server)))
            with pytest.raises(MalformedResponse):
                await branch.chat("hi")
            assert await branch.chat("hi") == "ok"
            with pytest.raises(BudgetExceeded) as info:
                await branch.chat("hi")
            assert info.value.limit == "max_cost_usd"
            with pytest.raises(BudgetExceeded):  # spent for good
                await branch.chat("hi")
            assert session.usage.cost_usd == pytest.approx(1.8)
    assert server.request_count == 3


async def test_issue36_integral_float_counts_are_read_and_fractional_ones_refused() -> None:
    """Some compatible servers write counts as 12.0: read as 12; 12.5 is no count."""
    document = {
        "id": "x",
        "object": "chat.completion",
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}],
    }
    whole = {**document, "usage": {"prompt_tokens": 12.0, "completion_tokens": 3.0}}
    half = {**document, "usage": {"prompt_tokens": 12.5, "completion_tokens": 3}}
    async with openai_server([pride.testing.Fault.raw(whole), pride.testing.Fault.raw(half)]) as (
        server
    ):
        async with Branch(chat_model=_model(server)) as branch:
            assert await branch.chat("hi") == "ok"
            assert (branch.usage.input_tokens, branch.usage.output_tokens) == (12, 3)
            with pytest.raises(MalformedResponse, match="prompt_tokens"):
                await branch.chat("hi")


# ------------------------------------- found beyond the items: the reply's model name


def _claimed(model: str, *, streamed: bool) -> Any:
    """A reply of 1,000,000 prompt tokens and no cost, claiming to come from ``model``."""
    usage = {"prompt_tokens": 1_000_000, "completion_tokens": 10}
    if not streamed:
        document = {
            "id": "x",
            "object": "chat.completion",
            "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}],
            "usage": usage,
        }
        return pride.testing.Fault.raw(document)
    chunk = {
        "id": "x",
        "object": "chat.completion.chunk",
        "model": model,
        "choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}],
    }
    last = {"id": "x", "object": "chat.completion.chunk", "model": model, "choices": []}
    events = [chunk, {**last, "usage": usage}]
    body = "".join(f"data: {json.dumps(event)}\n\n" for event in events) + "data: [DONE]\n\n"
    return pride.testing.Fault.raw(body, content_type="text/event-stream")


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize("claimed", ["a-model-nobody-prices", "gpt-4.1-nano"])
async def test_issue36_a_reply_is_priced_as_the_model_pride_asked_for(
    claimed: str, streamed: bool
) -> None:
    """The model name in a reply is the provider's word: one naming a model pride has
    no price for (counted as free) or a cheaper one cannot make a gpt-4o call cheap.
    A million prompt tokens of gpt-4o cost $2.50, past a $1 limit, whatever the reply says."""
    async with openai_server([_claimed(claimed, streamed=streamed)]) as server:
        model = iModel(
            "openai/gpt-4o",
            base_url=server.base_url,
            api_key="sk-test",
            retry=RetryPolicy(max_retries=0),
        )
        async with Branch(chat_model=model, budget=Budget(max_cost_usd=1.0)) as branch:
            with pytest.raises(BudgetExceeded) as info:
                await _chat(branch, streamed=streamed)
            assert info.value.limit == "max_cost_usd"
            assert branch.usage.cost_usd == pytest.approx(2.5 + 10 * 10 / 1_000_000)


async def test_issue36_an_unpriced_model_s_reply_is_priced_as_the_model_it_names() -> None:
    """A model pride has no price for (an alias, a router) whose reply names a priced
    one is priced as that one, as before: the dearer of the two names counts."""
    async with openai_server([_claimed("gpt-4o-2024-08-06", streamed=False)]) as server:
        model = iModel(
            "openai/my-router",
            base_url=server.base_url,
            api_key="sk",
            retry=RetryPolicy(max_retries=0),
        )
        async with Branch(chat_model=model) as branch:
            assert await branch.chat("hi") == "ok"
            assert branch.usage.cost_usd == pytest.approx(2.5 + 10 * 10 / 1_000_000)


# ------------------------------------------------------------ a reply with no usage

#: 240 characters: about 60 tokens by pride's estimate (60 to 61 with tiktoken's).
UNREPORTED_TEXT = "word " * 48


def _unreported(streamed: bool) -> Any:
    """A chat completion, whole or as an event stream, that reports no usage at all
    (as compatible servers that ignore ``stream_options.include_usage`` do)."""
    if not streamed:
        message = {"role": "assistant", "content": UNREPORTED_TEXT}
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
        return Fault.raw({"id": "c", "object": "chat.completion", "choices": [choice]})
    events = [
        {"choices": [{"index": 0, "delta": {"content": UNREPORTED_TEXT}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    data = "".join(f"data: {json.dumps(event)}\n\n" for event in events) + "data: [DONE]\n\n"
    return Fault.raw(data, content_type="text/event-stream")


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_reply_that_reports_no_usage_is_counted_at_the_estimate(
    streamed: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """A reply with no usage object counted 0 tokens and cost $0.00 ("priced, and
    free"), so no token or cost limit of any budget ever held against such a
    provider: two replies of about 60 tokens each passed a session's
    max_output_tokens=100 (and a 2,000-word reply a turn's 100, unstreamed). It is
    now counted at pride's estimate, said once in the log, and priced on it."""
    caplog.set_level(logging.WARNING, logger="pride.llm")
    async with openai_server([_unreported(streamed)] * 3) as server:
        async with Session(budget=Budget(max_output_tokens=100)) as session:
            model = iModel(
                "openai/gpt-4o",  # a priced model: zero tokens priced at $0.00
                base_url=server.base_url,
                api_key="sk-test",
                retry=RetryPolicy(max_retries=0),
            )
            branch = await session.spawn(Branch(name="a", chat_model=model))
            await _chat(branch, streamed=streamed)
            first = session.usage
            with pytest.raises(BudgetExceeded) as info:
                await _chat(branch, streamed=streamed)
    assert info.value.limit == "max_output_tokens"
    assert 55 <= first.output_tokens <= 65 and first.input_tokens > 0
    assert first.cost_usd is not None and first.cost_usd > 0
    said = [r.getMessage() for r in caplog.records if "reported no usage" in r.getMessage()]
    assert len(said) == 1
