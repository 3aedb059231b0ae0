"""The OpenAI-compatible endpoint of ``pride serve``, driven by the official ``openai`` SDK.

Sync and async clients, plain and streamed answers, and the SDK's own
exception classes for pride's errors. One server subprocess serves the
module (`served`); each test leaves it as it found it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import openai
import pytest
import trio

from .conftest import SCOPED, TOKEN, Served


def sync_client(served: Served, token: str = TOKEN) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{served.url}/v1", api_key=token, max_retries=0)


def async_client(served: Served, token: str = TOKEN) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=f"{served.url}/v1", api_key=token, max_retries=0)


async def on_asyncio(function: Callable[[], Awaitable[Any]]) -> Any:
    """``asyncio.run(function())`` in a worker thread: the async SDK on its usual loop."""
    return await trio.to_thread.run_sync(lambda: asyncio.run(function()))  # type: ignore[arg-type]


def question(text: str) -> list[Any]:
    return [{"role": "user", "content": text}]


async def test_models_lists_the_branches_a_token_reaches(served: Served) -> None:
    """``GET /v1/models``: every branch by name for a full token, the scope for a scoped one."""
    with sync_client(served) as client:
        names = {model.id for model in client.models.list()}
    assert {"writer", "reader", "support-1", "frugal", "pilot"} <= names
    with sync_client(served, SCOPED) as client:
        assert {model.id for model in client.models.list()} == {"reader", "support-1"}


async def test_a_sync_completion_answers_in_openais_shape(served: Served) -> None:
    """A plain completion: one choice, ``finish_reason`` stop, usage counted."""

    def complete() -> Any:
        with sync_client(served) as client:
            return client.chat.completions.create(model="writer", messages=question("hello"))

    completion = await trio.to_thread.run_sync(complete)
    assert completion.object == "chat.completion"
    assert completion.model == "writer"
    [choice] = completion.choices
    assert choice.message.role == "assistant"
    assert choice.message.content == "echo: hello"
    assert choice.finish_reason == "stop"
    assert completion.usage is not None and completion.usage.total_tokens >= 0


async def test_an_async_stream_yields_deltas_then_stop_and_usage(served: Served) -> None:
    """A streamed completion: a role delta, content deltas, a stop chunk, then usage."""

    async def chunks_of_a_stream() -> list[Any]:
        async with async_client(served) as client:
            stream = await client.chat.completions.create(
                model="reader",
                messages=question("stream me"),
                stream=True,
                stream_options={"include_usage": True},
            )
            return [chunk async for chunk in stream]

    chunks = await on_asyncio(chunks_of_a_stream)
    deltas = [c.choices[0].delta.content or "" for c in chunks if c.choices]
    assert "".join(deltas) == "echo: stream me"
    assert len([d for d in deltas if d]) > 1  # streamed in pieces, not at once
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].usage is not None and not chunks[-1].choices


async def test_a_sync_stream_and_an_async_plain_completion(served: Served) -> None:
    """The two other combinations of client and mode answer the same text."""

    def streamed() -> str:
        with sync_client(served) as client:
            stream = client.chat.completions.create(
                model="writer", messages=question("sync stream"), stream=True
            )
            return "".join(c.choices[0].delta.content or "" for c in stream if c.choices)

    assert await trio.to_thread.run_sync(streamed) == "echo: sync stream"

    async def plain() -> Any:
        async with async_client(served) as client:
            return await client.chat.completions.create(
                model="writer", messages=question("async plain")
            )

    completion = await on_asyncio(plain)
    assert completion.choices[0].message.content == "echo: async plain"


async def test_a_reasoning_models_reasoning_reaches_the_sdk_beside_the_answer(
    served: Served,
) -> None:
    """Reasoning is ``reasoning_content`` (the field OpenAI-compatible servers use),
    in the message and as deltas of its own, never in ``content``; the usage says
    how many output tokens went to reasoning, so what was withheld is counted."""

    def plain() -> Any:
        with sync_client(served) as client:
            return client.chat.completions.create(
                model="writer", messages=question("think:Two and two.")
            )

    completion = await trio.to_thread.run_sync(plain)
    message = completion.choices[0].message
    assert message.content == "the answer"
    assert message.model_extra["reasoning_content"] == "Two and two."
    assert completion.usage.completion_tokens_details.reasoning_tokens == 20

    async def streamed() -> list[Any]:
        async with async_client(served) as client:
            stream = await client.chat.completions.create(
                model="writer",
                messages=question("think:Three and three."),
                stream=True,
                stream_options={"include_usage": True},
            )
            return [chunk async for chunk in stream]

    chunks = await on_asyncio(streamed)
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    assert "".join(d.content or "" for d in deltas) == "the answer"
    thought = [(d.model_extra or {}).get("reasoning_content") or "" for d in deltas]
    assert "".join(thought) == "Three and three."
    assert max(i for i, t in enumerate(thought) if t) < min(
        i for i, d in enumerate(deltas) if d.content
    )
    assert chunks[-1].usage.completion_tokens_details.reasoning_tokens == 20


async def test_the_requests_messages_are_the_conversation_and_nothing_is_recorded(
    served: Served,
) -> None:
    """Earlier messages of the request reach the model; the branch's own history is untouched."""
    async with httpx.AsyncClient(base_url=served.url, headers=served.headers()) as http:
        before = (await http.get("/v1/branches/support-1/messages")).json()["total"]
        async with async_client(served) as client:
            completion = await client.chat.completions.create(
                model="support-1",
                messages=[
                    {"role": "system", "content": "You are terse."},
                    {"role": "user", "content": "first"},
                    {"role": "assistant", "content": "noted"},
                    {"role": "user", "content": "second"},
                ],
            )
        assert completion.choices[0].message.content == "echo: second"
        after = (await http.get("/v1/branches/support-1/messages")).json()["total"]
        assert after == before
        tree = (await http.get("/v1/branches")).json()["session"]
        assert "support-1" in {b["name"] for b in tree["branches"]}
        assert len(tree["branches"]) == 6  # the app's own, no transient clone left behind


async def test_errors_are_the_sdks_exception_classes(served: Served) -> None:
    """Unknown model 404, bad request 400, wrong token 401, budget 429, with OpenAI's body."""
    async with async_client(served) as client:
        with pytest.raises(openai.NotFoundError) as missing:
            await client.chat.completions.create(model="nobody", messages=question("x"))
        assert missing.value.code == "model_not_found"
        with pytest.raises(openai.BadRequestError):
            await client.chat.completions.create(model="writer", messages=[])
        with pytest.raises(openai.BadRequestError) as tools:
            await client.chat.completions.create(
                model="writer",
                messages=question("x"),
                tools=[{"type": "function", "function": {"name": "f", "parameters": {}}}],
            )
        assert tools.value.param is None or "tools" in str(tools.value)
        with pytest.raises(openai.RateLimitError) as spent:
            await client.chat.completions.create(model="frugal", messages=question("x"))
        assert spent.value.code == "insufficient_quota"
    async with async_client(served, "a-wrong-token-0123456789") as client:
        with pytest.raises(openai.AuthenticationError):
            await client.chat.completions.create(model="writer", messages=question("x"))
    async with async_client(served, SCOPED) as client:
        with pytest.raises(openai.NotFoundError):  # out of scope: as if it did not exist
            await client.chat.completions.create(model="writer", messages=question("x"))


async def test_a_tool_needing_approval_is_a_final_conflict_saying_where_to_go(
    served: Served,
) -> None:
    """A completion whose agent reached a tool that needs approval was answered 409
    telling the client to ``session.resolve`` a turn of the request's clone, which
    was removed with the answer: nothing could resolve it. The answer says the
    endpoint cannot wait for approval and names the native API; the SDK does not
    retry it; and no such turn is left listed as waiting, plain or streamed."""
    async with async_client(served) as client:
        with pytest.raises(openai.ConflictError) as held:
            await client.chat.completions.create(model="pilot", messages=question("use the tool"))
        message = str(held.value)
        assert held.value.code == "ApprovalRequired" and "launch" in message
        assert "session.resolve" not in message and "/v1/branches/pilot/send" in message
        assert held.value.response.headers.get("x-should-retry") == "false"
        stream = await client.chat.completions.create(
            model="pilot", messages=question("use the tool"), stream=True
        )
        errors = []
        with pytest.raises(openai.APIError) as streamed:
            async for chunk in stream:
                errors.append(chunk)
        assert "/v1/branches/pilot/send" in str(streamed.value), streamed.value
    async with httpx.AsyncClient(base_url=served.url, headers=served.headers()) as http:
        assert (await http.get("/v1/approvals")).json()["approvals"] == []
