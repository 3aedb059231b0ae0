"""operate: structured turns, native and fenced tool calling, concurrency, what is recorded."""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest
import trio
import trio.testing

import pride
from pride import (
    ActionRequest,
    ActionResponse,
    Branch,
    Operate,
    OperateResult,
    ParseFailed,
    Reason,
    RunEnd,
    RunFailed,
    RunStart,
    ScriptedModel,
    Unparsed,
)
from pride.llm import ScriptedReply, ToolCall
from pride.operations.act import MAX_CALLS_PER_REPLY
from tests.helpers import Recorder
from tests.operations.support import Answer, add, explode, kinds, pairs, system_of, user_texts


def _fenced(*replies: Any) -> ScriptedModel:
    """A scripted model treated as one without native tool calling."""
    model = ScriptedModel(list(replies))
    model.supports_native_tools = False
    return model


async def test_operate_returns_the_format_and_records_the_pair() -> None:
    """Without reason or actions, operate returns the parsed format (or text without one)."""
    model = ScriptedModel(['{"value": 5}', "plain"])
    async with Branch(chat_model=model) as branch:
        assert await branch.operate("five", response_format=Answer) == Answer(5)
        assert await pride.ask(branch, Operate("text please")) == "plain"
    assert kinds(branch.messages) == ["Instruction", "AssistantResponse"] * 2
    assert model.calls[0].tools == ()


async def test_two_tool_calls_run_concurrently_inside_the_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Each tool waits for the other to start, so both must overlap; both run in the turn."""
    started = {"left": trio.Event(), "right": trio.Event()}
    turns: list[Any] = []

    def make(name: str, other: str) -> Any:
        async def tool(x: int) -> int:
            started[name].set()
            with trio.fail_after(10):  # virtual time: a sequential run would time out here
                await started[other].wait()
            scope = pride.current_turn()
            turns.append(scope.turn_id if scope is not None else None)
            return x

        tool.__name__ = name
        tool.__doc__ = f"The {name} tool."
        return tool

    model = ScriptedModel(
        [[ToolCall("left", {"x": 1}, id="c1"), ToolCall("right", {"x": 2}, id="c2")], "done"]
    )
    recorder = Recorder()
    async with Branch(
        chat_model=model, tools=[make("left", "right"), make("right", "left")], observer=recorder
    ) as branch:
        result = await branch.operate("go", actions=True)
    [start] = recorder.of(RunStart)
    assert turns == [start.turn_id, start.turn_id]
    assert isinstance(result, OperateResult)
    assert result.output == "done"
    assert [r.output for r in result.action_responses] == [1, 2]
    assert kinds(branch.messages) == [
        "Instruction",
        "ActionRequest",
        "ActionRequest",
        "ActionResponse",
        "ActionResponse",
        "AssistantResponse",
    ]
    recorded = pairs(branch.messages)
    assert [(q.call_id, r.call_id, r.output) for q, r in recorded] == [
        ("c1", "c1", 1),
        ("c2", "c2", 2),
    ]
    assert len(recorder.of(RunEnd)) == 1


async def test_the_follow_up_call_sees_the_tool_results_natively() -> None:
    """After the calls run, the model is asked again with native tool results in the history."""
    model = ScriptedModel(
        [ScriptedReply("Let me add.", (ToolCall("add", {"a": 2, "b": 3}, id="call_a"),)), "5"]
    )
    async with Branch(chat_model=model, tools=[add]) as branch:
        result = await branch.operate("2+3?", actions=True)
    assert result.output == "5"
    first, second = model.calls
    assert [tool["name"] for tool in first.tools] == ["add"]
    roles = [entry["role"] for entry in second.messages]
    assert roles == ["user", "assistant", "tool"]
    assistant, tool = second.messages[1], second.messages[2]
    assert assistant["content"] == "Let me add."
    assert assistant["tool_calls"][0]["id"] == "call_a"
    assert (tool["tool_call_id"], tool["content"]) == ("call_a", "5")
    assert kinds(branch.messages) == [
        "Instruction",
        "AssistantResponse",
        "ActionRequest",
        "ActionResponse",
        "AssistantResponse",
    ]


async def test_a_raising_tool_yields_an_error_response_and_the_turn_succeeds() -> None:
    """A tool that raises becomes an ActionResponse carrying the error; RunEnd, not RunFailed."""
    model = ScriptedModel([ToolCall("explode", {"reason": "kaboom"}), "sorry, it failed"])
    recorder = Recorder()
    async with Branch(chat_model=model, tools=[explode], observer=recorder) as branch:
        result = await branch.operate("try it", actions=True)
    [response] = result.action_responses
    assert response.error == "RuntimeError: kaboom" and not response.succeeded
    assert result.output == "sorry, it failed"
    assert '{"error": "RuntimeError: kaboom"}' in str(model.calls[1].messages[-1]["content"])
    assert len(recorder.of(RunEnd)) == 1 and not recorder.of(RunFailed)


async def test_undecodable_arguments_are_reported_without_running_the_tool() -> None:
    """A tool call whose arguments did not decode gets an error response; the tool never runs."""
    ran: list[int] = []

    def record(n: int) -> int:
        """Record n."""
        ran.append(n)
        return n

    bad = ToolCall("record", {}, id="bad", arguments_error="tool arguments are not valid JSON")
    model = ScriptedModel([[bad, ToolCall("record", {"n": 1}, id="ok")], "done"])
    async with Branch(chat_model=model, tools=[record]) as branch:
        result = await branch.operate("go", actions=True)
    assert ran == [1]
    first, second = result.action_responses
    assert first.error is not None and "not valid JSON" in first.error
    assert second.output == 1


async def test_sequential_strategy_runs_calls_one_after_another() -> None:
    """action_strategy="sequential" runs calls in order; max_concurrent=1 never overlaps them."""
    events: list[str] = []

    async def step(name: str) -> str:
        """One step."""
        events.append(f"start {name}")
        await trio.lowlevel.checkpoint()
        events.append(f"end {name}")
        return name

    calls = [ToolCall("step", {"name": "a"}), ToolCall("step", {"name": "b"})]
    model = ScriptedModel([calls, "ok", calls, "ok"])
    async with Branch(chat_model=model, tools=[step]) as branch:
        await branch.operate("x", actions=True, action_strategy="sequential")
        assert events == ["start a", "end a", "start b", "end b"]
        events.clear()
        await branch.operate("y", actions=True, max_concurrent=1)
    # one at a time, in whichever order the scheduler picked
    assert sorted(events) == ["end a", "end b", "start a", "start b"]
    assert [event.split()[1] for event in events[::2]] == [e.split()[1] for e in events[1::2]]


async def test_invoke_actions_false_returns_the_requests_without_running_them() -> None:
    """With invoke_actions=False the calls are returned, not run, and noted in the history."""
    model = ScriptedModel([ToolCall("add", {"a": 1, "b": 1})])
    async with Branch(chat_model=model, tools=[add]) as branch:
        result = await branch.operate("plan only", actions=True, invoke_actions=False)
    assert [call.function for call in result.action_requests] == ["add"]
    assert result.action_responses == ()
    assert kinds(branch.messages) == ["Instruction", "AssistantResponse"]
    assert "not executed" in branch.messages[-1].text
    assert len(model.calls) == 1


async def test_rounds_stop_at_max_rounds_with_tools_turned_off() -> None:
    """After max_rounds rounds of calls, the last request sets tool_choice="none"."""
    model = ScriptedModel(lambda request: ToolCall("add", {"a": 1, "b": 1}))
    async with Branch(chat_model=model, tools=[add]) as branch:
        result = await branch.operate("loop", actions=True, max_rounds=2)
    assert [request.tool_choice for request in model.calls] == [None, None, "none"]
    assert len(result.action_responses) == 2
    assert len(result.action_requests) == 3  # the third was asked for but not run
    assert "not executed" in branch.messages[-1].text


async def test_reason_is_parsed_into_a_reason() -> None:
    """reason=True adds a reason field to the schema and returns it beside the output."""
    reply = '{"value": 1, "reason": {"title": "t", "content": "why", "confidence_score": 0.5}}'
    model = ScriptedModel([reply, '{"answer": "no format", "reason": "because"}'])
    async with Branch(chat_model=model) as branch:
        first = await branch.operate("x", response_format=Answer, reason=True)
        second = await branch.operate("y", reason=True)
    assert first == OperateResult(Answer(1), Reason("t", "why", 0.5))
    assert second.output == "no format" and second.reason == Reason(content="because")
    schema = model.calls[0].response_format["schema"]
    assert set(schema["properties"]) == {"value", "note", "reason"}


async def test_fenced_json_path_without_native_tools() -> None:
    """Without native tool calling, tools are described in the system text and requested in JSON."""
    model = _fenced(
        '```json\n{"value": 0, "action_required": true, '
        '"action_requests": [{"function": "add", "arguments": {"a": 20, "b": 22}}]}\n```',
        '{"value": 42, "action_requests": []}',
    )
    async with Branch(chat_model=model, tools=[add], system="You add.") as branch:
        result = await branch.operate("sum", response_format=Answer, actions=True)
    assert result.output == Answer(42)
    assert [r.output for r in result.action_responses] == [42]
    first, second = model.calls
    assert first.tools == () and first.tool_choice is None
    system = system_of(first)
    assert system is not None and system.startswith("You add.") and "- add: Add two" in system
    assert "action_requests" in first.response_format["schema"]["properties"]
    [(request, response)] = pairs(branch.messages)
    assert request.call_id is None and response.output == 42
    assert "Output: 42" in user_texts(second)[-1]


async def test_fenced_arguments_nested_too_deeply_to_read_fail_the_parse_not_the_runtime() -> None:
    """Model output is hostile: tool-call arguments given as a JSON string nested past
    any reader's depth (the standard library raises RecursionError) are arguments
    that are not valid JSON, a ParseFailed naming them; nothing is called."""
    arguments = json.dumps("[" * 100_000 + "]" * 100_000)
    deep = f'{{"value": 0, "action_requests": [{{"function": "add", "arguments": {arguments}}}]}}'
    model = _fenced(*[deep] * 4, "serving")
    async with Branch(chat_model=model, tools=[add]) as branch:
        with pytest.raises(ParseFailed, match="arguments is not valid JSON"):
            await branch.operate(
                "x", response_format=Answer, actions=True, handle_validation="raise"
            )
        assert not pairs(branch.messages)
        assert await branch.chat("still there?") == "serving"


async def test_a_python_literal_answer_that_is_not_json_is_reformatted_not_a_crash() -> None:
    """Model output is hostile: a reply read leniently as a Python literal carrying
    bytes (``{'answer': b'x'}``) made operate raise TypeError out of the turn (the
    answer is given back as JSON text); bytes in a fenced call's arguments reached
    the tool and the recorded ActionRequest. Such a reply is no JSON: the reformat
    call's answer is the result, and nothing is called."""
    model = _fenced(
        "{'answer': b'x', 'action_requests': [{'function': 'add', 'arguments': {'a': b'1'}}]}",
        '{"answer": "fixed"}',
    )
    async with Branch(chat_model=model, tools=[add]) as branch:
        result = await branch.operate("x", reason=True, actions=True)
    assert result.output == "fixed" and result.action_requests == ()
    assert not pairs(branch.messages)


@pytest.mark.parametrize("path", ["native", "fenced"])
async def test_the_tool_calls_of_one_reply_are_bounded(path: str) -> None:
    """Model output is hostile: a reply may ask for any number of tool calls, and every
    one was run and recorded (20,000 calls of 50 bytes each took 230 MB and 5 s; the
    32 MiB a reply may hold, gigabytes). The first MAX_CALLS_PER_REPLY run, and the
    reply's recorded text says how many more were not run."""
    count = MAX_CALLS_PER_REPLY + 1000
    if path == "native":
        model = ScriptedModel([[ToolCall("add", {"a": 1, "b": 2})] * count, "3"])
    else:
        call = {"function": "add", "arguments": {"a": 1, "b": 2}}
        reply = json.dumps({"answer": "", "action_requests": [call] * count})
        model = _fenced(reply, '{"answer": "3"}')
    async with Branch(chat_model=model, tools=[add]) as branch:
        result = await branch.operate("add", actions=True)
    cap = MAX_CALLS_PER_REPLY
    assert len(result.action_responses) == cap == len(pairs(branch.messages))
    assert all(response.output == 3 for response in result.action_responses)
    assert result.output == "3"
    [reply, *_] = [m for m in branch.messages if isinstance(m, pride.AssistantResponse)]
    assert f"1000 further tool calls were not run: at most {cap}" in reply.text


async def test_fenced_path_drops_the_action_fields_after_the_last_round() -> None:
    """On the fenced path the call after max_rounds asks for a schema without action fields."""
    asking = '{"value": 0, "action_requests": [{"function": "add", "arguments": {"a": 1, "b": 2}}]}'
    model = _fenced(asking, '{"value": 3}')
    async with Branch(chat_model=model, tools=[add]) as branch:
        result = await branch.operate("x", response_format=Answer, actions=True, max_rounds=1)
    assert result.output == Answer(3)
    last = model.calls[-1]
    assert "action_requests" not in last.response_format["schema"]["properties"]
    assert "- add:" not in (system_of(last) or "")


async def test_writeback_runs_when_actions_produced_responses() -> None:
    """Context providers' writeback sees the action responses of the turn."""
    seen: list[Any] = []

    class Notes:
        name = "notes"

        async def provide(self, branch: Any, instruction: Any) -> str | None:
            return None

        async def writeback(self, branch: Any, responses: Any) -> None:
            seen.extend(responses)

    model = ScriptedModel([ToolCall("add", {"a": 1, "b": 2}), "3", "no tools this time"])
    async with Branch(chat_model=model, tools=[add], system="s") as branch:
        branch.providers.register(Notes())
        await branch.operate("a", actions=True)
        await branch.operate("b", actions=True)
    assert [response.output for response in seen] == [3]
    assert all(isinstance(response, ActionResponse) for response in seen)


async def test_parse_failure_modes() -> None:
    """An unparseable final reply returns the text by default, or raises with "raise"."""
    model = ScriptedModel(["not json", "junk", "junk", "junk", "junk"])
    async with Branch(chat_model=model) as branch:
        assert await branch.operate("x", response_format=Answer, skip_validation=True) == "not json"
        with pytest.raises(ParseFailed, match="Answer"):
            await branch.operate("y", response_format=Answer, handle_validation="raise")


@pytest.mark.parametrize("mode", ["return_value", "return_none", "raise"])
async def test_a_reply_that_does_not_parse_is_never_a_bare_str(mode: str) -> None:
    """The shape table of docs/operations.md: under every handle_validation, a failed
    parse is an Unparsed, None or ParseFailed; with reason on, it is OperateResult.output."""
    model = ScriptedModel(lambda request: "I'd rather not use JSON")
    async with Branch(chat_model=model) as branch:
        for options in ({}, {"reason": True}):
            command = Operate("x", response_format=Answer, handle_validation=mode, **options)
            if mode == "raise":
                with pytest.raises(ParseFailed) as info:
                    await pride.ask(branch, command)
                assert info.value.failure_kind == "extraction"
                continue
            result = await pride.ask(branch, command)
            output = result.output if options else result
            if options:
                assert isinstance(result, OperateResult) and result.reason is None
            if mode == "return_none":
                assert output is None
            else:
                assert isinstance(output, Unparsed)
                assert output.text == "I'd rather not use JSON"
                assert output.attempts == 4  # the direct attempt and 3 reformat calls
        if mode == "raise":
            with pytest.raises(ParseFailed):
                await branch.communicate("y", response_format=Answer, handle_validation=mode)
        else:
            answered = await branch.communicate("y", response_format=Answer, handle_validation=mode)
            assert answered is None if mode == "return_none" else isinstance(answered, Unparsed)
        assert await branch.operate("z") == "I'd rather not use JSON"  # no format: the text


async def test_bad_input_fails_the_turn_clearly_and_the_actor_keeps_serving() -> None:
    """A clashing field, an unknown tool or a negative max_rounds raise; the branch serves on."""

    @attrs.frozen
    class Clash:
        reason: str

    async with Branch(chat_model=ScriptedModel(["fine"]), tools=[add]) as branch:
        with pytest.raises(ValueError, match="reason"):
            await branch.operate("x", response_format=Clash, reason=True)
        with pytest.raises(KeyError, match="nope"):
            await branch.operate("x", actions=True, tools=("nope",))
        with pytest.raises(ValueError, match="max_rounds"):
            await branch.operate("x", max_rounds=-1)
        assert await branch.chat("still there?") == "fine"
    assert len(branch.messages) == 0


async def test_operate_with_no_tools_registered_asks_for_none() -> None:
    """actions=True with no tools registered sends no tools and still returns an OperateResult."""
    model = ScriptedModel(["just text"])
    async with Branch(chat_model=model) as branch:
        result = await branch.operate("x", actions=True)
    assert result == OperateResult("just text")
    assert model.calls[0].tools == ()


async def test_action_messages_carry_the_turn_id() -> None:
    """Every message operate records is signalled with the turn's id."""
    recorder = Recorder()
    model = ScriptedModel([ToolCall("add", {"a": 1, "b": 2}), "3"])
    async with Branch(chat_model=model, tools=[add], observer=recorder) as branch:
        await branch.operate("x", actions=True)
    [start] = recorder.of(RunStart)
    added = [s for s in recorder.signals if type(s).__name__ == "MessageAdded"]
    assert {s.turn_id for s in added} == {start.turn_id}
    assert [type(s.message) for s in added][1:3] == [ActionRequest, ActionResponse]


async def test_a_blocking_hook_denies_a_call_and_the_turn_goes_on() -> None:
    """A before_tool_call hook that raises denies that call; it is answered "denied: ..."."""
    points: list[str] = []

    class Guard:
        def emit(self, point: str, payload: Any) -> None:
            points.append(point)
            if point == "before_tool_call" and payload["call"].arguments.get("a") == 666:
                raise PermissionError("not that number")

    calls = [ToolCall("add", {"a": 666, "b": 1}), ToolCall("add", {"a": 1, "b": 1})]
    model = ScriptedModel([calls, "done"])
    async with Branch(chat_model=model, tools=[add]) as branch:
        await (await pride.send(branch, pride.Attach(hooks=Guard()))).result()
        result = await branch.operate("x", actions=True)
    denied, allowed = result.action_responses
    assert denied.error == "denied: not that number" and allowed.output == 2
    assert points.count("before_tool_call") == 2
    assert "tool_call_error" in points and "after_tool_call" in points
