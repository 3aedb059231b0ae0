"""ReAct and ReActStream: rounds, extensions, tools, loop control, streaming."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

import pride
from pride import (
    Branch,
    LoopBreak,
    LoopDirective,
    OperateResult,
    ReAct,
    ReActAnalysis,
    ReActStream,
    RunEnd,
    RunFailed,
    RunStart,
    ScriptedModel,
)
from pride.llm import ModelRequest, ToolCall
from tests.helpers import Recorder
from tests.operations.support import Answer, add, kinds, pairs, user_texts


def analysis(text: str, more: bool) -> str:
    return json.dumps(
        {
            "analysis": text,
            "extension_needed": more,
            "reason": {"title": "step", "content": text, "confidence_score": 0.8},
        }
    )


class Script:
    """A model answering analysis rounds by ``on_round`` and the final step with ``answer``."""

    def __init__(
        self,
        more: bool = True,
        answer: str = '{"answer": "42"}',
        on_round: Callable[[int], Any] | None = None,
    ) -> None:
        self.rounds = 0
        self.answers = 0
        self.more = more
        self.answer = answer
        self.on_round = on_round
        self.model = ScriptedModel(self.reply)

    def reply(self, request: ModelRequest) -> Any:
        name = (request.response_format or {}).get("name")
        if name == "ReActAnalysis":
            self.rounds += 1
            if self.on_round is not None:
                custom = self.on_round(self.rounds)
                if custom is not None:
                    return custom
            return analysis(f"round {self.rounds}", self.more)
        self.answers += 1
        return self.answer


async def test_react_stops_after_max_extensions() -> None:
    """A model that always wants more gets 1 + max_extensions rounds, then the answer step."""
    script = Script(more=True)
    recorder = Recorder()
    async with Branch(chat_model=script.model, observer=recorder) as branch:
        assert await branch.ReAct("what is 6*7?", max_extensions=2) == "42"
    assert (script.rounds, script.answers) == (3, 1)
    assert [type(s) for s in recorder.signals if isinstance(s, RunStart | RunEnd)] == [
        RunStart,
        RunEnd,
    ]
    texts = [user_texts(request)[-1] for request in script.model.calls]
    assert "what is 6*7?" in texts[0] and "up to 2 more" in texts[0]
    assert "Rounds left after this one: 1" in texts[1]
    assert "Rounds left after this one: 0" in texts[2]
    assert "final answer" in texts[3]


async def test_react_ends_rounds_when_no_extension_is_needed() -> None:
    """extension_needed=false after round 1 goes straight to the answer; context shown once."""
    script = Script(more=False)
    async with Branch(chat_model=script.model) as branch:
        result = await pride.ask(branch, ReAct("q", context={"fact": "x"}, return_analysis=True))
    answer, rounds = result
    assert answer == "42"
    [only] = rounds
    assert isinstance(only, OperateResult) and only.output == ReActAnalysis("round 1", False)
    assert only.reason is not None and only.reason.title == "step"
    assert '"fact"' in user_texts(script.model.calls[0])[-1]
    assert '"fact"' not in user_texts(script.model.calls[1])[-1]


async def test_extension_allowed_false_and_the_cap() -> None:
    """extension_allowed=False allows one round; max_extensions above 100 is capped at 100."""
    script = Script(more=True)
    async with Branch(chat_model=script.model) as branch:
        await branch.ReAct("q", extension_allowed=False)
        assert script.rounds == 1
        script.rounds = 0
        await branch.ReAct("q", max_extensions=1000)
        assert script.rounds == 101
        with pytest.raises(ValueError, match="max_extensions"):
            await branch.ReAct("q", max_extensions=-1)


async def test_react_rounds_run_tools_and_see_their_results() -> None:
    """A round's native tool calls run inside the turn before that round's analysis."""

    def on_round(number: int) -> Any:
        if number == 1:
            return ToolCall("add", {"a": 40, "b": 2}, id="call_1")
        return analysis("40 + 2 is 42", False)

    script = Script(on_round=on_round)
    async with Branch(chat_model=script.model, tools=[add]) as branch:
        answer, rounds = await branch.ReAct("add 40 and 2", return_analysis=True)
    assert answer == "42"
    assert [r.output for r in rounds[0].action_responses] == [42]
    assert rounds[0].output == ReActAnalysis("40 + 2 is 42", False)
    assert [(q.call_id, r.output) for q, r in pairs(branch.messages)] == [("call_1", 42)]
    assert script.model.calls[1].messages[-1]["role"] == "tool"
    assert script.model.calls[-1].tools == ()  # the answer step offers no tools


async def test_react_returns_the_callers_format() -> None:
    """With a response_format, the final step parses into it and ReAct returns the instance."""
    script = Script(more=False, answer='{"value": 42}')
    async with Branch(chat_model=script.model) as branch:
        assert await branch.ReAct("q", response_format=Answer) == Answer(42)


async def test_an_unparsed_answer_keeps_the_type_react_promises() -> None:
    """Default format: a prose answer is still the answer text (a str, as always). The
    caller's format: an Unparsed, never the bare text posing as the format."""
    prose = Script(more=False, answer="Forty-two, plainly.")
    async with Branch(chat_model=prose.model) as branch:
        assert await branch.ReAct("q") == "Forty-two, plainly."
        unparsed = await branch.ReAct("q", response_format=Answer)
    assert isinstance(unparsed, pride.Unparsed)
    assert (unparsed.text, unparsed.format) == ("Forty-two, plainly.", "Answer")


async def test_unparseable_round_moves_to_the_answer() -> None:
    """A round whose reply is not an analysis cannot ask for more; the answer step follows."""
    script = Script(on_round=lambda number: "I am not JSON")
    async with Branch(chat_model=script.model) as branch:
        assert await branch.ReAct("q", max_extensions=3) == "42"
    assert script.rounds == 4  # the round and its three reformat calls
    assert script.answers == 1


async def test_break_mid_loop_fails_the_turn() -> None:
    """BREAK sent through branch.control during a round fails the turn with LoopBreak."""
    holder: dict[str, Branch] = {}

    def on_round(number: int) -> None:
        if number == 2:
            holder["branch"].control(LoopDirective.BREAK, reason="enough")

    script = Script(more=True, on_round=on_round)
    recorder = Recorder()
    async with Branch(chat_model=script.model, observer=recorder) as branch:
        holder["branch"] = branch
        with pytest.raises(LoopBreak, match="enough"):
            await branch.ReAct("q", max_extensions=5)
        assert await branch.chat("after") is not None  # the actor keeps serving
    assert script.rounds == 2 and script.answers == 1  # the chat only
    assert recorder.of(RunFailed)[0].error_type == "LoopBreak"


async def test_cancel_mid_loop_ends_cleanly_without_an_answer() -> None:
    """CANCEL stops at once, skips the answer step, and the turn ends with RunEnd."""
    holder: dict[str, Branch] = {}

    def on_round(number: int) -> None:
        if number == 2:
            holder["branch"].control(LoopDirective.CANCEL)

    script = Script(more=True, on_round=on_round)
    recorder = Recorder()
    async with Branch(chat_model=script.model, observer=recorder) as branch:
        holder["branch"] = branch
        answer, rounds = await branch.ReAct("q", max_extensions=5, return_analysis=True)
    assert answer is None and len(rounds) == 2
    assert script.answers == 0
    assert recorder.of(RunEnd) and not recorder.of(RunFailed)


async def test_react_stream_yields_each_round_then_the_answer() -> None:
    """ReActStream streams rounds as they complete, then the answer; ask returns the list."""
    script = Script(more=True)
    async with Branch(chat_model=script.model) as branch:
        async with branch.ReActStream("q", max_extensions=1) as items:
            streamed = [item async for item in items]
        async with pride.stream(branch, ReActStream("q", max_extensions=0)) as items:
            single = [item async for item in items]
        asked = await pride.ask(branch, ReActStream("q", max_extensions=1))
    for result in (streamed, asked):
        assert [type(item) for item in result] == [OperateResult, OperateResult, str]
        first, second = (item.output.analysis for item in result[:2])
        assert int(second.split()[-1]) == int(first.split()[-1]) + 1
        assert result[-1] == "42"
    assert len(single) == 2


async def test_react_stream_cancel_ends_the_stream_early() -> None:
    """A CANCEL sent by the consumer after the first round ends the stream without an answer."""
    script = Script(more=True)
    recorder = Recorder()
    async with Branch(chat_model=script.model, observer=recorder) as branch:
        received = []
        async with branch.ReActStream("q", max_extensions=5) as items:
            async for item in items:
                received.append(item)
                # False once the turn has already taken the first CANCEL and is finalising
                branch.control(LoopDirective.CANCEL)
    assert received and all(isinstance(item, OperateResult) for item in received)
    assert len(received) <= 2 and script.answers == 0
    assert recorder.of(RunEnd) and not recorder.of(RunFailed)


async def test_leaving_a_react_stream_early_is_clean() -> None:
    """Breaking out after the first round finalises the turn; the branch keeps serving."""
    script = Script(more=True)
    recorder = Recorder()
    async with Branch(chat_model=script.model, observer=recorder) as branch:
        async with branch.ReActStream("q", max_extensions=5) as items:
            async for _ in items:
                break
        assert await branch.ReAct("again", extension_allowed=False) == "42"
    assert [type(s).__name__ for s in recorder.signals if isinstance(s, RunStart | RunEnd)] == [
        "RunStart",
        "RunEnd",
        "RunStart",
        "RunEnd",
    ]


async def test_interpret_step_rewrites_the_instruction() -> None:
    """interpret=True rewrites the instruction (at temperature 0.1) before round 1."""
    calls: list[ModelRequest] = []

    def reply(request: ModelRequest) -> str:
        calls.append(request)
        if len(calls) == 1:
            return "A clear question about primes."
        if (request.response_format or {}).get("name") == "ReActAnalysis":
            return analysis("done", False)
        return '{"answer": "2, 3, 5"}'

    async with Branch(chat_model=ScriptedModel(reply)) as branch:
        answer = await branch.ReAct("primes??", interpret=True, interpret_domain="math")
    assert answer == "2, 3, 5"
    assert calls[0].options["temperature"] == 0.1 and "math" in user_texts(calls[0])[-1]
    assert user_texts(calls[1])[-1].startswith("A clear question about primes.")
    assert kinds(branch.messages)[0] == "Instruction"
    assert branch.messages[0].instruction == "A clear question about primes."
