"""Issue 33 item 5: Anthropic prompt caching, its breakpoints and what the cache reports.

The requests go to pride.testing's loopback server, which caches prefixes up to
each ``cache_control`` breakpoint as the API does (``pride.testing._caching``):
a first call with breakpoints reports cache writes, a second with the same
prefix cache reads. Each request body is validated against the anthropic SDK's
own request type.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pydantic
import pytest
from anthropic.types import Message
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming

from pride import Branch, Budget, RunEnd, Session
from pride.errors import BadRequest
from pride.llm import ModelRequest, RetryPolicy, ScriptedReply, iModel
from pride.testing import openai_server

MARK = {"type": "ephemeral"}
TOOLS = [
    {"name": "add", "description": "Add.", "parameters": {"type": "object"}},
    {"name": "mul", "description": "Multiply.", "parameters": {"type": "object"}},
]
SYSTEM = "You are a careful assistant. " * 40
REQUEST_TYPE: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(MessageCreateParamsNonStreaming)


def _drained(value: Any) -> Any:
    """A validated value with pydantic's lazy iterators (the SDK types' Iterable fields)
    consumed, so that every nested block is checked."""
    if isinstance(value, dict):
        return {key: _drained(item) for key, item in value.items()}
    if isinstance(value, list | tuple) or type(value).__name__ == "ValidatorIterator":
        return [_drained(item) for item in value]
    return value


def _valid_request(body: dict[str, Any]) -> None:
    """``body`` is an Anthropic Messages request as the anthropic SDK types it."""
    _drained(REQUEST_TYPE.validate_python(body))


def _model(server: Any, **options: Any) -> iModel:
    return iModel(
        "anthropic/claude-sonnet-4-5",
        base_url=server.base_url,
        api_key="sk-ant-test",
        retry=RetryPolicy(max_retries=0),
        **options,
    )


def _marks(body: dict[str, Any]) -> Iterator[str]:
    """Where the request's breakpoints are: ``tool NAME``, ``system``, ``message N``."""
    for tool in body.get("tools") or ():
        if "cache_control" in tool:
            yield f"tool {tool['name']}"
    system = body.get("system")
    if isinstance(system, list):
        yield from ("system" for block in system if "cache_control" in block)
    for index, message in enumerate(body["messages"]):
        if isinstance(message["content"], list):
            for block in message["content"]:
                if "cache_control" in block:
                    yield f"message {index}"


def _history() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "What is 2 + 3?"},
        {"role": "assistant", "content": "5."},
        {"role": "user", "content": "And times 4?"},
    ]


async def test_the_default_policy_marks_tools_system_and_the_history_before_the_new_input() -> None:
    """Tools (the last one), the system text (as one marked text block) and the message
    before this turn's input are breakpoints; the new input is not; the caller's request
    is left as it was; the SDK's request type accepts the body."""
    history = _history()
    request = ModelRequest(history, system=SYSTEM, tools=TOOLS)
    async with openai_server(["20."]) as server:
        async with _model(server) as model:
            await model.invoke(request)
    body = server.requests[0].body
    _valid_request(body)
    assert list(_marks(body)) == ["tool mul", "system", "message 1"]
    assert body["system"] == [{"type": "text", "text": SYSTEM, "cache_control": MARK}]
    assert body["messages"][1]["content"] == [{"type": "text", "text": "5.", "cache_control": MARK}]
    assert body["messages"][2] == {"role": "user", "content": "And times 4?"}
    assert list(request.messages) == _history() and list(request.tools) == TOOLS  # unchanged


async def test_in_a_tool_loop_the_history_breakpoint_stays_before_the_turns_input() -> None:
    """Tool results are not new input: the breakpoint stays on the message before the
    user's question, and a thinking block is never marked (the API refuses it)."""
    messages = [
        {"role": "user", "content": "Hello"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Hi."},
                {"type": "thinking", "thinking": "t", "signature": "s"},
            ],
        },
        {"role": "user", "content": [{"type": "text", "text": "2 + 3?"}]},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "add", "input": {}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1"}]},
    ]
    async with openai_server(["5"]) as server:
        async with _model(server, prompt_cache=["history"]) as model:
            await model.invoke(ModelRequest(messages, system="s", tools=TOOLS))
    body = server.requests[0].body
    _valid_request(body)
    assert list(_marks(body)) == ["message 1"]
    assert body["messages"][1]["content"][0]["cache_control"] == MARK
    assert "cache_control" not in body["messages"][1]["content"][1]
    assert body["system"] == "s"  # not asked for: sent as plain text


@pytest.mark.parametrize(
    ("option", "marks"),
    [
        (False, []),
        (["system"], ["system"]),
        (("history", "tools"), ["tool mul", "message 1"]),
        (True, ["tool mul", "system", "message 1"]),
    ],
)
async def test_the_model_option_chooses_the_breakpoints(option: Any, marks: list[str]) -> None:
    """``prompt_cache`` turns caching off, or marks only the parts it names."""
    async with openai_server(["ok"]) as server:
        async with _model(server, prompt_cache=option) as model:
            await model.invoke(ModelRequest(_history(), system=SYSTEM, tools=TOOLS))
    body = server.requests[0].body
    _valid_request(body)
    assert list(_marks(body)) == marks
    assert "prompt_cache" not in body  # pride's option, never sent


@pytest.mark.parametrize("option", ["tools", b"system", 3, ["tools", "prefix"], [None], {1: 2}])
def test_a_bad_prompt_cache_option_is_refused_when_the_model_is_made(option: Any) -> None:
    """Not a bool or a list of "tools", "system", "history": ValueError, saying what is."""
    with pytest.raises(ValueError, match="prompt_cache"):
        iModel("anthropic/claude-sonnet-4-5", api_key="k", prompt_cache=option)


async def test_a_bad_prompt_cache_option_of_one_call_is_refused_before_sending() -> None:
    """A call's own options are checked by the same rules: BadRequest, nothing sent."""
    async with openai_server(["ok"]) as server:
        async with _model(server) as model:
            with pytest.raises(BadRequest, match="prompt_cache"):
                await model.invoke(
                    ModelRequest(_history(), options={"prompt_cache": ["everything"]})
                )
            await model.invoke(ModelRequest(_history(), options={"prompt_cache": False}))
    assert server.request_count == 1
    assert list(_marks(server.requests[0].body)) == []


def test_the_option_is_kept_as_plain_data() -> None:
    """to_dict carries the checked option, and from_dict takes it back."""
    model = iModel("anthropic/claude-sonnet-4-5", api_key="k", prompt_cache=("tools", "system"))
    data = model.to_dict()
    assert data["request_options"]["prompt_cache"] == ["tools", "system"]
    assert iModel.from_dict(data).request_options["prompt_cache"] == ["tools", "system"]


async def test_breakpoints_the_caller_placed_count_against_the_limit_of_four() -> None:
    """Tools given in Anthropic's form with their own markers leave room for fewer of
    pride's: never more than 4 in a request (the API refuses a fifth)."""
    tools = [
        {"name": f"t{n}", "input_schema": {"type": "object"}, "cache_control": MARK}
        for n in range(3)
    ]
    async with openai_server(["ok", "ok"]) as server:
        async with _model(server) as model:
            await model.invoke(ModelRequest(_history(), system=SYSTEM, tools=tools))
            await model.invoke(ModelRequest(_history(), system=SYSTEM, tools=[*tools, tools[0]]))
    first, second = (request.body for request in server.requests)
    _valid_request(first)
    assert list(_marks(first)) == ["tool t0", "tool t1", "tool t2", "system"]
    assert len(list(_marks(second))) == 4  # four of the caller's: none of pride's


async def test_the_loopback_cache_reports_a_write_then_a_read_of_the_same_prefix() -> None:
    """First call: the prefix up to the last breakpoint is written; second call with the
    same prefix: read, nothing written; both priced by kind; each reply is an
    anthropic.types.Message."""
    request = ModelRequest(_history(), system=SYSTEM, tools=TOOLS)
    async with openai_server(["one", "two"]) as server:
        async with _model(server) as model:
            first = await model.invoke(request)
            second = await model.invoke(request)
    assert first.usage.cache_write_tokens > 0 and first.usage.cached_tokens == 0
    assert second.usage.cached_tokens == first.usage.cache_write_tokens
    assert second.usage.cache_write_tokens == 0
    assert second.usage.input_tokens == first.usage.input_tokens
    # claude-sonnet-4: written at $3.75, read at $0.30 per million: the read is cheaper
    assert first.usage.cost_usd is not None and second.usage.cost_usd is not None
    assert second.usage.cost_usd < first.usage.cost_usd
    for recorded in server.requests:
        _valid_request(recorded.body)


async def test_a_streamed_call_reports_the_cache_too() -> None:
    """The stream's message_start usage carries the cache figures."""
    request = ModelRequest(_history(), system=SYSTEM)
    async with openai_server(["one", "two"]) as server:
        async with _model(server) as model:
            first = await model.invoke(request)
            async with model.stream(request) as stream:
                async for _ in stream:
                    pass
            second = stream.response
    assert second.usage.cached_tokens == first.usage.cache_write_tokens > 0


async def test_the_sdk_reads_the_cache_figures_as_anthropic_message_usage() -> None:
    """The plain reply with cache figures validates as anthropic.types.Message."""
    import anthropic
    import trio

    system = [{"type": "text", "text": SYSTEM, "cache_control": MARK}]
    async with openai_server(["a", "b"]) as server:

        def run() -> list[dict[str, Any]]:
            with anthropic.Anthropic(base_url=server.root_url, api_key="k", max_retries=0) as c:
                return [
                    c.messages.with_raw_response.create(
                        model="claude-x",
                        max_tokens=64,
                        system=system,  # type: ignore[arg-type]
                        messages=[{"role": "user", "content": "hi"}],
                    ).http_response.json()
                    for _ in range(2)
                ]

        replies = await trio.to_thread.run_sync(run)
    first, second = (Message.model_validate(data, strict=True) for data in replies)
    assert first.usage.cache_creation_input_tokens and not first.usage.cache_read_input_tokens
    assert second.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens


async def test_a_conversation_reads_its_history_from_the_cache_on_the_next_turn() -> None:
    """Two turns of a branch: the second reads what the first wrote (system and tools),
    and its RunEnd says so; a cost budget counts the cheaper reads."""
    ends: list[RunEnd] = []
    script = [ScriptedReply("Hello."), ScriptedReply("Goodbye.")]
    async with openai_server(script) as server:
        async with Session(budget=Budget(max_cost_usd=1.0)) as session:
            session.observe(RunEnd, handler=ends.append)
            branch = await session.spawn(
                Branch(name="chat", system=SYSTEM, chat_model=_model(server))
            )
            await branch.chat_and_record("Hi")
            await branch.chat_and_record("Bye")
            spent = session.usage.cost_usd
    first, second = ends
    assert first.cache_write_tokens > 0 and first.cached_tokens == 0
    assert second.cached_tokens == first.cache_write_tokens  # the system text, read back
    assert second.cache_write_tokens > 0  # and the first turn's exchange, written
    assert list(_marks(server.requests[1].body)) == ["system", "message 1"]
    assert spent == pytest.approx((first.total_cost_usd or 0) + (second.total_cost_usd or 0))


@pytest.mark.parametrize(
    "body",
    [
        {"model": "m", "max_tokens": 1, "tools": 3, "system": 5, "messages": "x"},
        {"model": "m", "max_tokens": 1, "system": [{"cache_control": 1}], "messages": [7, None]},
        {"model": "m", "max_tokens": 1, "messages": [{"role": [], "content": {"a": 1}}]},
    ],
)
async def test_the_loopback_cache_answers_a_malformed_request_body(body: dict[str, Any]) -> None:
    """Request bodies are hostile to the server too: a malformed one is still answered."""
    import httpx

    async with openai_server(["ok", "ok"]) as server:
        async with httpx.AsyncClient() as client:
            for _ in range(2):
                reply = await client.post(f"{server.base_url}/messages", json=body)
                assert reply.status_code == 200
                usage = reply.json()["usage"]
                assert usage["input_tokens"] >= 0 and usage["cache_read_input_tokens"] >= 0
    assert server.errors == []
