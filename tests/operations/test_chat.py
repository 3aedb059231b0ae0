"""chat, chat_and_record and communicate: what each records and returns, and token streaming."""

from __future__ import annotations

import logging

import pytest

import pride
from pride import (
    AssistantResponse,
    Branch,
    Chat,
    ChatAndRecord,
    Communicate,
    Instruction,
    Operate,
    RunEnd,
    RunStart,
    ScriptedModel,
)
from pride.llm import ScriptedReply, ToolCall
from tests.helpers import Recorder, echo_model
from tests.operations.support import Answer, kinds


async def test_chat_records_nothing() -> None:
    """chat returns the reply through the facade and ask, and the history is unchanged."""
    async with Branch(chat_model=echo_model(), system="be brief") as branch:
        before = list(branch.messages)
        assert await branch.chat("hello") == "re: hello"
        assert await pride.ask(branch, Chat("again")) == "re: again"
        assert list(branch.messages) == before


async def test_chat_can_return_the_instruction_and_response() -> None:
    """return_ins_res_message gives the unrecorded Instruction and AssistantResponse."""
    async with Branch(chat_model=echo_model()) as branch:
        instruction, response = await branch.chat("hi", return_ins_res_message=True)
    assert isinstance(instruction, Instruction) and instruction.instruction == "hi"
    assert isinstance(response, AssistantResponse) and response.text == "re: hi"
    assert len(branch.messages) == 0


async def test_chat_sees_the_history_and_offers_tools_without_running_them() -> None:
    """chat compiles the recorded history and sends tool schemas without executing calls."""
    model = ScriptedModel(["one", "two"])

    def lookup(key: str) -> str:
        """Look a key up."""
        return key

    async with Branch(chat_model=model, tools=[lookup]) as branch:
        await branch.chat_and_record("first")
        assert await pride.ask(branch, Chat("second", tools=True)) == "two"
    request = model.calls[1]
    assert [m["role"] for m in request.messages] == ["user", "assistant", "user"]
    assert [tool["name"] for tool in request.tools] == ["lookup"]
    assert kinds(branch.messages) == ["Instruction", "AssistantResponse"]


async def test_chat_and_record_records_the_pair() -> None:
    """chat_and_record records the instruction and the response, via facade and ask."""
    async with Branch(chat_model=echo_model()) as branch:
        assert await branch.chat_and_record("a") == "re: a"
        assert await pride.ask(branch, ChatAndRecord("b")) == "re: b"
    assert kinds(branch.messages) == ["Instruction", "AssistantResponse"] * 2


async def test_communicate_records_exactly_two_messages() -> None:
    """One communicate adds exactly an Instruction and an AssistantResponse."""
    recorder = Recorder()
    async with Branch(chat_model=echo_model(), system="s", observer=recorder) as branch:
        assert await branch.communicate("hello") == "re: hello"
        added = len(branch.messages)
        assert await pride.ask(branch, Communicate("again")) == "re: again"
    assert added == 3  # the system message and the pair
    assert kinds(branch.messages[1:]) == ["Instruction", "AssistantResponse"] * 2
    assert [type(s).__name__ for s in recorder.signals if isinstance(s, RunStart | RunEnd)] == [
        "RunStart",
        "RunEnd",
    ] * 2


async def test_communicate_parses_into_the_response_format() -> None:
    """With a response format, communicate returns the parsed value and records the raw text."""
    model = ScriptedModel(['Here: ```json\n{"value": 4}\n```'])
    async with Branch(chat_model=model) as branch:
        result = await branch.communicate("four?", response_format=Answer)
    assert result == Answer(4)
    assert branch.messages[-1].text.startswith("Here:")
    assert model.calls[0].response_format is not None
    assert model.calls[0].response_format["name"] == "Answer"


async def test_communicate_skip_validation_and_clear_messages() -> None:
    """skip_validation returns the text; clear_messages starts from an empty history."""
    model = ScriptedModel(["not json", "fresh"])
    async with Branch(chat_model=model, system="s") as branch:
        assert await branch.communicate("x", response_format=Answer, skip_validation=True) == (
            "not json"
        )
        assert await branch.communicate("y", clear_messages=True) == "fresh"
    assert kinds(branch.messages) == ["System", "Instruction", "AssistantResponse"]


async def test_chat_streams_tokens_to_a_stream_consumer() -> None:
    """Through pride.stream, chat yields the reply's text chunks in order."""
    model = ScriptedModel(["a reply long enough to need several chunks"], chunk_size=5)
    async with Branch(chat_model=model) as branch:
        async with pride.stream(branch, Chat("go")) as chunks:
            received = [chunk async for chunk in chunks]
    assert len(received) > 1
    assert "".join(received) == "a reply long enough to need several chunks"


async def test_communicate_and_operate_stream_tokens_too() -> None:
    """communicate and operate stream chunks and still record their messages."""
    model = ScriptedModel(["streamed text", '{"value": 2}'], chunk_size=4)
    async with Branch(chat_model=model) as branch:
        async with pride.stream(branch, Communicate("a")) as chunks:
            first = [chunk async for chunk in chunks]
        async with pride.stream(branch, Operate("b", response_format=Answer)) as chunks:
            second = [chunk async for chunk in chunks]
    assert "".join(first) == "streamed text"
    assert "".join(second) == '{"value": 2}'
    assert kinds(branch.messages) == ["Instruction", "AssistantResponse"] * 2


CALL = ToolCall("ask_researcher", {"question": "why actors?"}, id="c1")


@pytest.mark.parametrize(
    "command",
    [Chat("brief me"), Chat("brief me", tools=True), ChatAndRecord("brief me"), Communicate("b")],
    ids=["Chat", "Chat(tools)", "ChatAndRecord", "Communicate"],
)
async def test_issue35_a_reply_of_only_tool_calls_is_said_not_answered_empty(
    command: Chat | ChatAndRecord | Communicate, caplog: pytest.LogCaptureFixture
) -> None:
    """A verb that runs no tools, given a reply that is only tool calls, answers (and
    records) a note naming the calls not run, and logs a warning saying which verb
    would run them; it answered "" and recorded an empty assistant message."""

    def ask_researcher(question: str) -> str:
        """Ask the researcher."""
        return question

    async with Branch(
        name="planner", chat_model=ScriptedModel([CALL]), tools=[ask_researcher]
    ) as branch:
        with caplog.at_level(logging.WARNING, logger="pride.operations"):
            answer = await pride.ask(branch, command)
    note = "(requested actions, not executed: ask_researcher({'question': 'why actors?'}))"
    assert answer == note
    if not isinstance(command, Chat):
        assert kinds(branch.messages) == ["Instruction", "AssistantResponse"]
        assert branch.messages[-1].text == note
    [record] = [r for r in caplog.records if r.name == "pride.operations"]
    assert record.levelno == logging.WARNING
    message = record.getMessage()
    assert "'planner'" in message and type(command).__name__ in message, message
    assert "Run, ReAct or Operate(actions=True)" in message, message


async def test_issue35_text_beside_tool_calls_is_kept_and_the_calls_noted() -> None:
    """A reply with text and tool calls answers the text, then the note of the calls."""
    reply = ScriptedReply("Let me ask.", (CALL,))
    async with Branch(chat_model=ScriptedModel([reply])) as branch:
        answer = await branch.chat_and_record("brief me")
    assert answer.startswith("Let me ask.\n\n(requested actions, not executed: ask_researcher(")
    assert branch.messages[-1].text == answer
