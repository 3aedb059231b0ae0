"""Anthropic's extended thinking: the validated option, the request, and blocks sent back.

Every call goes to pride.testing's loopback server over real HTTP, told to act
as the real API does (``require_thinking=True``): it signs the thinking blocks
it returns and refuses a tool loop that lacks them, or carries them changed.
"""

from __future__ import annotations

from typing import Any

import pytest

from pride import BadRequest, Reasoning, ReasoningDelta
from pride.llm import ModelRequest, RetryPolicy, ScriptedReply, ToolCall, iModel
from pride.messages import ActionRequest, ActionResponse, Instruction
from pride.messages.history import History
from pride.testing import openai_server

KEY = "sk-ant-test-thinking-0123456789"
ADD = {
    "name": "add",
    "description": "Add two numbers.",
    "parameters": {"type": "object", "properties": {"a": {"type": "number"}}},
}


def _model(server: Any, **options: Any) -> iModel:
    options.setdefault("thinking", 2048)
    return iModel(
        "anthropic/claude-sonnet-4-5",
        base_url=server.base_url,
        api_key=KEY,
        retry=RetryPolicy.never(),
        **options,
    )


# -- the option ------------------------------------------------------------------------


def test_a_budget_becomes_anthropics_object_with_room_for_the_answer() -> None:
    """``thinking=2048`` is sent as Anthropic's object; max_tokens counts budget and answer."""
    model = iModel("anthropic/claude-sonnet-4-5", api_key=KEY, thinking=2048)
    assert model.request_options["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert model.request_options["max_tokens"] == 2048 + 4096  # the default max_tokens
    again = iModel.from_dict(model.to_dict())
    assert again.request_options == model.request_options


def test_anthropics_own_object_and_false_are_accepted() -> None:
    """The object as the API documents it, and False (off), are kept in Anthropic's form."""
    on = {"type": "enabled", "budget_tokens": 1024}
    model = iModel("anthropic/claude-sonnet-4-5", api_key=KEY, thinking=on, max_tokens=9000)
    assert model.request_options == {"thinking": on, "max_tokens": 9000}
    off = iModel("anthropic/claude-sonnet-4-5", api_key=KEY, thinking=False)
    assert off.request_options == {"thinking": {"type": "disabled"}}


@pytest.mark.parametrize(
    ("options", "complaint"),
    [
        ({"thinking": 1000}, "at least 1024"),
        ({"thinking": True}, "budget of tokens"),
        ({"thinking": "lots"}, "budget of tokens"),
        ({"thinking": {"type": "enabled"}}, "budget_tokens must be an int"),
        ({"thinking": {"type": "on", "budget_tokens": 2048}}, '"enabled" or "disabled"'),
        ({"thinking": {"type": "enabled", "budget_tokens": 2048, "x": 1}}, "unknown thinking"),
        ({"thinking": 4096, "max_tokens": 4096}, "above the thinking budget"),
        ({"thinking": 2048, "temperature": 0.2}, "temperature 1"),
        ({"thinking": 2048, "top_k": 5}, "top_k"),
        ({"thinking": 2048, "top_p": 0.5}, "top_p"),
    ],
)
def test_a_bad_thinking_configuration_is_refused_when_the_model_is_made(
    options: dict[str, Any], complaint: str
) -> None:
    """What the API would refuse at the first call is a ValueError at configuration."""
    with pytest.raises(ValueError, match=complaint):
        iModel("anthropic/claude-sonnet-4-5", api_key=KEY, **options)


def test_another_wire_format_takes_thinking_as_given() -> None:
    """OpenAI-compatible servers give ``thinking`` their own meanings: it is passed as is."""
    model = iModel("glm", base_url="http://127.0.0.1:1/v1", thinking={"type": "enabled"})
    assert model.request_options == {"thinking": {"type": "enabled"}}


async def test_a_calls_bad_thinking_option_is_a_bad_request_never_sent() -> None:
    """Per-call options come from outside: a bad one is BadRequest before any byte is sent."""
    async with openai_server(["unused"], require_thinking=True) as server:
        async with _model(server) as model:
            for options in (
                {"thinking": {"type": "enabled", "budget_tokens": 10}},
                {"temperature": 0.1},
            ):
                request = ModelRequest([{"role": "user", "content": "hi"}], options=options)
                with pytest.raises(BadRequest, match="not sent"):
                    await model.invoke(request)
            forced = ModelRequest(
                [{"role": "user", "content": "hi"}], tools=(ADD,), tool_choice="required"
            )
            with pytest.raises(BadRequest, match="tool_choice"):
                await model.invoke(forced)
    assert server.request_count == 0


# -- the wire ---------------------------------------------------------------------------


async def test_thinking_is_asked_for_and_its_signed_block_read() -> None:
    """The request carries ``thinking``; the reply's block comes back signed, apart from text."""
    reply = ScriptedReply("4", thinking="2 + 2 is 4.")
    async with openai_server([reply], require_thinking=True) as server:
        async with _model(server) as model:
            response = await model.invoke(ModelRequest([{"role": "user", "content": "2+2?"}]))
    assert server.requests[0].body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert response.text == "4"
    [block] = response.reasoning
    assert (block.provider, block.reasoning) == ("anthropic", "2 + 2 is 4.")
    assert block.signature


async def test_streamed_thinking_comes_as_reasoning_deltas_before_the_text() -> None:
    """Streaming yields ReasoningDelta items for the thinking and str for the answer."""
    reply = ScriptedReply("The answer is 4.", thinking="Adding two and two.", redacted="hidden")
    async with openai_server([reply], chunk_size=5, require_thinking=True) as server:
        async with _model(server) as model:
            request = ModelRequest([{"role": "user", "content": "2+2?"}])
            async with model.stream(request) as stream:
                items = [item async for item in stream]
    text = "".join(item for item in items if isinstance(item, str))
    thought = "".join(item.text for item in items if isinstance(item, ReasoningDelta))
    assert (text, thought) == ("The answer is 4.", "Adding two and two.")
    assert isinstance(items[0], ReasoningDelta)
    thinking, redacted = stream.response.reasoning
    assert thinking.signature and thinking.reasoning == "Adding two and two."
    assert redacted.redacted and redacted.encrypted


def _loop(first: Any, reasoning: tuple[Reasoning, ...]) -> list[dict[str, Any]]:
    [call] = first.tool_calls
    history = History(
        [
            Instruction(instruction="add 2 and 3"),
            *reasoning,
            ActionRequest(function="add", arguments=call.arguments, call_id=call.id),
            ActionResponse(function="add", output=5, call_id=call.id),
        ]
    )
    return history.compile("anthropic")


async def test_a_tool_loop_sends_the_signed_blocks_back_or_is_refused() -> None:
    """With the blocks first in the assistant entry the loop goes on; without, or edited,
    the server refuses as the API does (400, BadRequest, not retried)."""
    script = [
        ScriptedReply(tool_calls=(ToolCall("add", {"a": 2}, "toolu_1"),), thinking="Use add."),
        "5",
        "5",
    ]
    async with openai_server(script, require_thinking=True) as server:
        async with _model(server) as model:
            first = await model.invoke(
                ModelRequest([{"role": "user", "content": "add"}], tools=(ADD,))
            )
            with pytest.raises(BadRequest, match="must start with a thinking block"):
                await model.invoke(ModelRequest(_loop(first, ()), tools=(ADD,)))
            edited = (
                Reasoning(
                    provider="anthropic",
                    reasoning="Use mul.",
                    signature=first.reasoning[0].signature,
                ),
            )
            with pytest.raises(BadRequest, match="Invalid `signature`"):
                await model.invoke(ModelRequest(_loop(first, edited), tools=(ADD,)))
            ok = await model.invoke(ModelRequest(_loop(first, first.reasoning), tools=(ADD,)))
    assert ok.text == "5"
    assert len(server.refusals) == 2
    sent = server.requests[-1].body["messages"][1]["content"]
    assert [block["type"] for block in sent] == ["thinking", "tool_use"]
    assert sent[0]["signature"] == first.reasoning[0].signature


async def test_a_lenient_server_takes_what_the_real_api_refuses() -> None:
    """Without ``require_thinking`` the server checks nothing (for tests of other things)."""
    script = [ScriptedReply(tool_calls=(ToolCall("add", {"a": 2}, "toolu_1"),), thinking="x"), "5"]
    async with openai_server(script) as server:
        async with _model(server) as model:
            first = await model.invoke(
                ModelRequest([{"role": "user", "content": "add"}], tools=(ADD,))
            )
            ok = await model.invoke(ModelRequest(_loop(first, ()), tools=(ADD,)))
    assert ok.text == "5" and server.refusals == []


async def test_openai_chat_completions_have_no_thinking() -> None:
    """A script's thinking is Anthropic's: over chat completions the reply has none."""
    async with openai_server([ScriptedReply("hi", thinking="private")]) as server:
        async with iModel("openai/gpt-test", base_url=server.base_url, api_key="k") as model:
            response = await model.invoke(ModelRequest([{"role": "user", "content": "x"}]))
    assert response.text == "hi" and response.reasoning == ()
