"""Tests for ScriptedModel: scripts, streaming, errors, usage, statistics."""

from __future__ import annotations

import pytest
import trio

from pride.errors import BadRequest, RateLimited, ScriptExhausted
from pride.llm import (
    ModelRequest,
    RetryPolicy,
    ScriptedModel,
    ScriptedReply,
    ToolCall,
    Usage,
    iModel,
)


def _request(text: str = "hello") -> ModelRequest:
    return ModelRequest(messages=[{"role": "user", "content": text}])


async def test_replies_are_used_in_order():
    """Text, a tool call, several tool calls and a ScriptedReply come back as scripted."""
    one = ToolCall("add", {"a": 1})
    two = [ToolCall("x", {}), ToolCall("y", {"q": "z"})]
    model = ScriptedModel(["hi", one, two, ScriptedReply(text="both", tool_calls=(one,))])
    first = await model.invoke(_request())
    assert (first.text, first.tool_calls, first.finish_reason) == ("hi", (), "stop")
    second = await model.invoke(_request())
    assert second.tool_calls == (one,) and second.finish_reason == "tool_calls"
    assert (await model.invoke(_request())).tool_calls == tuple(two)
    last = await model.invoke(_request())
    assert (last.text, last.tool_calls) == ("both", (one,))
    assert last.provider == "scripted" and last.model == "scripted"


async def test_running_out_raises_script_exhausted_with_counts():
    """The error says how many replies there were and which call failed."""
    model = ScriptedModel(["only"])
    await model.invoke(_request())
    with pytest.raises(ScriptExhausted, match=r"has 1 and this is call 2"):
        await model.invoke(_request())
    assert model.statistics().failures == 1


async def test_sync_and_async_functions_receive_the_request():
    """A reply function gets the ModelRequest; async functions are awaited."""

    def sync(request: ModelRequest) -> str:
        return "sync:" + request.messages[-1]["content"]

    async def asynchronous(request: ModelRequest) -> ToolCall:
        await trio.sleep(0)
        return ToolCall("lookup", {"q": request.messages[-1]["content"]})

    assert (await ScriptedModel(sync).invoke(_request("a"))).text == "sync:a"
    reply = await ScriptedModel(asynchronous).invoke(_request("b"))
    assert reply.tool_calls[0].arguments == {"q": "b"}


async def test_no_replies_means_echo():
    """ScriptedModel() echoes the last user message, text parts included."""
    model = ScriptedModel()
    assert (await model.invoke(_request("ping"))).text == "echo: ping"
    parts = ModelRequest(
        messages=[
            {"role": "user", "content": "old"},
            {"role": "assistant", "content": "x"},
            {"role": "user", "content": [{"type": "text", "text": "new"}]},
        ]
    )
    assert (await model.invoke(parts)).text == "echo: new"


async def test_an_exception_item_is_raised_for_that_call():
    """A non-retryable error in the script is raised once, and the script moves on."""
    model = ScriptedModel([BadRequest("no"), "after"])
    with pytest.raises(BadRequest):
        await model.invoke(_request())
    assert (await model.invoke(_request())).text == "after"


async def test_a_scripted_rate_limit_goes_through_the_retry_pipeline(autojump_clock):
    """A scripted RateLimited is retried like a real 429, honouring retry_after."""
    model = ScriptedModel([RateLimited("slow down", retry_after=5.0), "ok"])
    reply = await model.invoke(_request())
    assert reply.text == "ok"
    assert trio.current_time() == 5.0
    assert len(model.calls) == 2
    stats = model.statistics()
    assert (stats.calls, stats.retries, stats.failures) == (1, 1, 0)


async def test_retries_give_up_after_max_retries(autojump_clock):
    """With max_retries=2, three attempts are made and the last error is raised."""
    errors = [RateLimited(f"429 #{i}") for i in range(5)]
    model = ScriptedModel(errors, retry=RetryPolicy(max_retries=2))
    with pytest.raises(RateLimited, match="429 #2"):
        await model.invoke(_request())
    assert len(model.calls) == 3


async def test_usage_is_estimated_unless_given():
    """Usage is estimated at ~4 characters per token, or taken from the reply."""
    model = ScriptedModel(
        ["12345678", ScriptedReply("x", usage=Usage(7, 3, cached_tokens=2, cost_usd=0.5))]
    )
    estimated = await model.invoke(_request("x" * 40))
    assert (estimated.usage.input_tokens, estimated.usage.output_tokens) == (10, 2)
    assert estimated.usage.cost_usd is None
    given = await model.invoke(_request())
    assert given.usage == Usage(7, 3, cached_tokens=2, cost_usd=0.5)
    assert model.statistics().usage == estimated.usage + given.usage


async def test_streaming_yields_chunks_then_the_full_response():
    """stream() yields chunk_size pieces; .response has the text and tool calls."""
    call = ToolCall("f", {"x": 1})
    model = ScriptedModel([ScriptedReply("abcdefghij", tool_calls=(call,))], chunk_size=4)
    async with model.stream(_request()) as stream:
        deltas = [delta async for delta in stream]
    assert deltas == ["abcd", "efgh", "ij"]
    assert stream.response.text == "abcdefghij"
    assert stream.response.tool_calls == (call,)
    assert model.statistics().in_flight == 0


async def test_response_before_the_end_is_an_error():
    """Reading .response before the stream ended raises RuntimeError."""
    model = ScriptedModel(["abcdefgh"], chunk_size=2)
    async with model.stream(_request()) as stream:
        async for _ in stream:
            break
        with pytest.raises(RuntimeError, match="read to its end"):
            _ = stream.response
    with pytest.raises(RuntimeError, match="read to its end"):
        _ = stream.response


async def test_iterating_outside_the_block_is_an_error():
    """A ModelStream must be entered before iterating, and only once."""
    model = ScriptedModel()
    stream = model.stream(_request())
    with pytest.raises(RuntimeError, match="async with"):
        await stream.__anext__()
    async with stream:
        pass
    with pytest.raises(RuntimeError, match="only once"):
        async with stream:
            pass


async def test_delay_runs_on_the_trio_clock(autojump_clock):
    """delay= sleeps with trio.sleep, so MockClock makes slow models instant."""
    model = ScriptedModel(["slow"], delay=30.0)
    assert (await model.invoke(_request())).text == "slow"
    assert trio.current_time() == 30.0


async def test_calls_record_every_attempt():
    """model.calls holds each request received."""
    model = ScriptedModel(["a", "b"])
    first, second = _request("1"), _request("2")
    await model.invoke(first)
    await model.invoke(second)
    assert model.calls == [first, second]
    assert model.received == 2


async def test_calls_keep_the_last_keep_calls_requests():
    """Exactly the last ``keep_calls`` requests are kept, in order; ``received``
    counts them all; ``keep_calls=0`` keeps none."""
    model = ScriptedModel(lambda request: "ok", keep_calls=3)
    requests = [_request(str(n)) for n in range(7)]
    for request in requests:
        await model.invoke(request)
    assert model.calls == requests[-3:]
    assert model.received == 7
    quiet = ScriptedModel(lambda request: "ok", keep_calls=0)
    await quiet.invoke(_request())
    assert (quiet.calls, quiet.received) == ([], 1)
    with pytest.raises(ValueError, match="keep_calls"):
        ScriptedModel(keep_calls=-1)


async def test_a_long_conversation_keeps_a_bounded_record():
    """Each kept request holds the conversation as it was sent (a list as long as
    the history), so a long-running scripted process keeps only the default
    number of them, whatever the number of turns."""
    import gc

    from pride import Branch, ChatAndRecord, ask
    from pride.llm import KEEP_CALLS

    model = ScriptedModel()
    turns = KEEP_CALLS + 50
    async with Branch(chat_model=model) as branch:
        for n in range(turns):
            await ask(branch, ChatAndRecord(f"long turn {n}"))
        assert len(model.calls) == KEEP_CALLS
        assert model.received == turns
        assert model.calls[-1].messages[-1]["content"] == f"long turn {turns - 1}"
        gc.collect()
        alive = [
            found
            for found in gc.get_objects()
            if isinstance(found, ModelRequest)
            and str(found.messages[-1].get("content", "")).startswith("long turn ")
        ]  # this conversation's (another test's may be alive too)
        assert len(alive) <= KEEP_CALLS


async def test_cancellation_during_a_call_is_not_a_failure(autojump_clock):
    """A cancelled call leaves in_flight at zero and counts no failure."""
    model = ScriptedModel(["late"], delay=10.0)
    with trio.move_on_after(1):
        await model.invoke(_request())
    stats = model.statistics()
    assert (stats.in_flight, stats.failures) == (0, 0)


def test_serialisation_gives_an_echo_model():
    """to_dict is provider and model only; from_dict and from_spec give echo models."""
    model = ScriptedModel(["x"], model="bot")
    data = model.to_dict()
    assert data == {"provider": "scripted", "model": "bot"}
    again = iModel.from_dict(data)
    assert isinstance(again, ScriptedModel) and again.model == "bot"
    assert isinstance(iModel.from_spec("scripted"), ScriptedModel)
    assert iModel.from_spec("scripted/demo").model == "demo"


async def test_copy_starts_the_script_again():
    """copy() gives an independent model with the same script from its start."""
    model = ScriptedModel(["a", "b"], chunk_size=3)
    await model.invoke(_request())
    twin = model.copy()
    assert (await twin.invoke(_request())).text == "a"
    assert twin.calls is not model.calls and len(model.calls) == 1


def test_scripted_model_attributes():
    """A scripted model speaks the OpenAI format and supports tools and structured output."""
    model = ScriptedModel()
    assert (model.provider, model.api_format) == ("scripted", "openai")
    assert model.supports_native_tools and model.supports_structured_output


def test_bad_scripts_are_rejected():
    """A string or a number is not a script; bad items fail when used."""
    with pytest.raises(TypeError, match="list of replies"):
        ScriptedModel("hello")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="chunk_size"):
        ScriptedModel(chunk_size=0)


async def test_a_bad_item_raises_type_error():
    """An item of the wrong type is reported when its call comes."""
    model = ScriptedModel([42])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="not int"):
        await model.invoke(_request())
