"""The invariant checker itself: it passes real runs and catches each kind of violation."""

from __future__ import annotations

import uuid

import pytest
import trio
import trio.testing

import pride
from pride import (
    ActionRequest,
    ActionResponse,
    Branch,
    BranchStopped,
    Chat,
    ChatAndRecord,
    Instruction,
    MessageAdded,
    RunEnd,
    RunFailed,
    RunStart,
)
from tests.helpers import Gate, echo_model
from tests.reliability.invariants import InvariantChecker, sendable_problems

BRANCH = uuid.uuid4()


def start(turn: uuid.UUID) -> RunStart:
    return RunStart(branch_id=BRANCH, branch_name="x", turn_id=turn)


def end(turn: uuid.UUID) -> RunEnd:
    return RunEnd(branch_id=BRANCH, branch_name="x", turn_id=turn)


def added(turn: uuid.UUID | None) -> MessageAdded:
    return MessageAdded(
        branch_id=BRANCH, branch_name="x", turn_id=turn, message=Instruction(instruction="hi")
    )


def violations(*signals: pride.Signal) -> list[str]:
    checker = InvariantChecker()
    for signal in signals:
        checker.dispatch(signal)
    return checker.violations


class TestOrdering:
    """Each ordering violation is reported, naming the branch and the turn."""

    def test_a_clean_sequence_passes(self) -> None:
        """RunStart, its messages, its terminal, then the next turn: nothing to report."""
        one, two = uuid.uuid4(), uuid.uuid4()
        assert violations(start(one), added(one), end(one), added(None), start(two), end(two)) == []

    def test_overlapping_turns(self) -> None:
        """A RunStart while another turn is open is reported."""
        one, two = uuid.uuid4(), uuid.uuid4()
        assert "started while" in violations(start(one), start(two))[0]

    def test_a_second_terminal(self) -> None:
        """Two terminals for one turn are reported."""
        one = uuid.uuid4()
        found = violations(start(one), end(one), RunFailed(branch_id=BRANCH, turn_id=one))
        assert "second terminal" in found[0]

    def test_a_terminal_without_start(self) -> None:
        """A terminal for a turn that never started is reported."""
        assert "never started" in violations(end(uuid.uuid4()))[0]

    def test_a_message_after_its_terminal(self) -> None:
        """A turn's MessageAdded after its terminal is reported."""
        one = uuid.uuid4()
        assert "after its terminal" in violations(start(one), end(one), added(one))[0]

    def test_an_untracked_message_during_a_turn(self) -> None:
        """A message without turn id while a turn is open is reported unless allowed."""
        one = uuid.uuid4()
        assert "without a turn id" in violations(start(one), added(None))[0]
        lenient = InvariantChecker(allow_untracked=True)
        for signal in (start(one), added(None), end(one)):
            lenient.dispatch(signal)
        assert lenient.violations == []

    def test_an_actor_stopping_with_a_turn_open(self) -> None:
        """BranchStopped while a turn is open is reported."""
        one = uuid.uuid4()
        found = violations(start(one), BranchStopped(branch_id=BRANCH, reason="crash"))
        assert "still open" in found[0]

    def test_check_raises_with_every_violation(self) -> None:
        """check() raises AssertionError listing what was found."""
        checker = InvariantChecker()
        checker.dispatch(end(uuid.uuid4()))
        with pytest.raises(AssertionError, match="1 invariant violations"):
            checker.check()


class TestQuiescent:
    """At rest: open turns, unanswered envelopes and history mismatches are reported."""

    def test_an_open_turn(self) -> None:
        """A turn without a terminal fails the quiescent check."""
        checker = InvariantChecker()
        checker.dispatch(start(uuid.uuid4()))
        checker.check()
        with pytest.raises(AssertionError, match="never reached a terminal"):
            checker.check(quiescent=True)

    async def test_a_real_run_passes(self) -> None:
        """Turns, a recorded exchange and a dropped envelope satisfy every invariant."""
        checker = InvariantChecker()
        gate = Gate()
        with checker.envelopes():
            async with Branch(chat_model=gate.model, observer=checker) as branch:
                first = await pride.send(branch, ChatAndRecord("one"))
                dropped = await pride.send(branch, Chat("dropped"))
                await gate.started.wait()
                dropped.cancel()
                gate.release("one")
                assert await first.result() == "reply to one"
        checker.check(branch, quiescent=True)
        assert len(checker.turn_ids(branch)) == 1

    async def test_an_unanswered_envelope(self) -> None:
        """An envelope still waiting fails the quiescent check."""
        checker = InvariantChecker()
        gate = Gate()
        with checker.envelopes():
            async with Branch(chat_model=gate.model, observer=checker) as branch:
                reply = await pride.send(branch, Chat("stuck"))
                await trio.testing.wait_all_tasks_blocked()
                assert checker.pending == [reply]
                with pytest.raises(AssertionError, match="never answered"):
                    checker.check(quiescent=True)
                gate.release("stuck")
                await reply.result()

    def test_an_envelope_answered_twice_or_started_late(self) -> None:
        """A second answer, or a start after the answer, fails the quiescent check."""
        checker = InvariantChecker()
        with checker.envelopes():
            reply = pride.Reply(Branch(), Chat("x"))
            reply.succeed("first")
            reply.fail(RuntimeError("second"))
            reply.start(None, None)
        with pytest.raises(AssertionError) as caught:
            checker.check(quiescent=True)
        assert "then again: error RuntimeError(second)" in str(caught.value)
        assert "started after it had been answered" in str(caught.value)

    def test_an_answer_that_contradicts_the_terminal(self) -> None:
        """A turn that ended with RunEnd must have answered its caller with a result."""
        checker = InvariantChecker()
        branch = Branch(name="x", id=BRANCH)
        turn = uuid.uuid4()
        with checker.envelopes():
            reply = pride.Reply(branch, Chat("x"))
            reply.start(turn, None)
            checker.dispatch(start(turn))
            checker.dispatch(end(turn))
            reply.fail(RuntimeError("but it failed"))
        with pytest.raises(AssertionError, match="RunEnd, but the caller got error"):
            checker.check(quiescent=True)

    def test_a_tool_call_left_unanswered(self) -> None:
        """A native tool call without its result makes the history unsendable, in both shapes."""
        request = ActionRequest(function="f", call_id="call-1")
        answered = Branch(
            messages=[
                Instruction(instruction="go"),
                request,
                ActionResponse(function="f", call_id="call-1", action_request_id=request.id),
            ]
        )
        assert sendable_problems(answered) == []
        dangling = Branch(messages=[Instruction(instruction="go"), request])
        found = sendable_problems(dangling)
        assert len(found) == 2 and "unanswered at the end" in found[0]
        stray = Branch(messages=[ActionResponse(function="f", call_id="call-9")])
        assert "answers no open call" in sendable_problems(stray)[0]

    async def test_a_history_that_differs_from_the_signals(self) -> None:
        """A message recorded while nobody observed makes history and signals differ."""
        checker = InvariantChecker()
        async with Branch(chat_model=echo_model()) as branch:
            await branch.chat_and_record("unobserved")
        with pytest.raises(AssertionError, match="differs"):
            checker.check(branch, quiescent=True)
        checker.baseline(branch)
        checker.check(branch, quiescent=True)
