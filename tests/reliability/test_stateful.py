"""A hypothesis state machine over a session of two branches: the invariants hold after
every rule.

How hypothesis drives trio here: ``RuleBasedStateMachine`` calls its rules
synchronously, but the branches need their actors running across all of
them, so the world lives in one trio run hosted by the test in guest mode
(``tests/reliability/guest.py``). Each rule replays one action (send, ask
with a timeout, a caller cancelled from outside, stream-and-abandon, loop
control, nested and cross-branch calls, crashes, remove/include, stop)
inside that run and returns once every task is blocked; trio is paused
between rules, and the ordering invariants are checked after each. The
run's ``MockClock`` autojumps, so model delays, timeouts and hanging tools
cost no real time. The teardown ends the program: every branch must answer
a final turn (or, in some examples, a shutdown with work still in flight
must answer everything), the quiescent invariants (every envelope answered
once, every turn terminated, histories equal to their signals and still
sendable to a provider) must hold, no task a tool left behind may still
run, and each conversation must survive a JSON round trip.

Determinism: pytest-trio makes trio's scheduler deterministic under
hypothesis and hands its random generator to hypothesis, and the profile is
derandomized, so a failing program replays exactly and shrinks to a short
list of rules. Each action is bounded by a virtual-time limit, so a
deadlock shows up as "hung" rather than a stuck test.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import trio
import trio.testing
from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

import pride
from pride import (
    Act,
    ActionCall,
    Branch,
    Call,
    Chat,
    ChatAndRecord,
    LoopDirective,
    Run,
    Session,
    Stop,
)
from tests.reliability.guest import GuestRun
from tests.reliability.invariants import InvariantChecker
from tests.reliability.support import (
    ALLOWED_ERRORS,
    Leftovers,
    linked_tools,
    register_operations,
    tools,
    world_model,
)

NAMES = ("a", "b")
HANG_LIMIT = 10_000.0  # virtual seconds: any action taking longer is a deadlock

# Command kinds; those that may never finish on their own are asked with a timeout only.
KINDS = (
    "chat",
    "record",
    "fail",
    "tool=slow",
    "tool=spawn",
    "tool=boom",
    "tool=selfask",
    "tool=peerask",
    "nested",
    "peer",
    "act",
    "act=selfask",
    "act=peerask",
)
HANGING = ("tool=hang",)
CRASH = ("crash",)


@attrs.frozen
class Send:
    target: int
    kind: str
    delay: int


@attrs.frozen
class Ask:  # a caller in its own task, which the program may cancel later
    target: int
    kind: str
    delay: int
    timeout: float | None


@attrs.frozen
class AskNow:
    target: int
    kind: str
    delay: int
    timeout: float


@attrs.frozen
class CancelCaller:
    index: int


@attrs.frozen
class CancelReply:
    index: int


@attrs.frozen
class StreamAbandon:
    target: int
    kind: str
    after: int


@attrs.frozen
class Control:
    target: int
    directive: LoopDirective


@attrs.frozen
class Remove:
    target: int


@attrs.frozen
class Include:
    target: int


@attrs.frozen
class StopBranch:
    target: int


@attrs.frozen
class Wait:
    seconds: float


targets = st.integers(0, 1)
delays = st.sampled_from([0, 1, 2, 5])
actions = st.one_of(
    st.builds(Send, targets, st.sampled_from(KINDS + CRASH), delays),
    st.builds(Ask, targets, st.sampled_from(KINDS), delays, st.sampled_from([None, 0, 1, 3])),
    st.builds(Ask, targets, st.sampled_from(HANGING), delays, st.sampled_from([0.5, 2])),
    st.builds(AskNow, targets, st.sampled_from(KINDS + HANGING), delays, st.sampled_from([1, 4])),
    st.builds(CancelCaller, st.integers(0, 7)),
    st.builds(CancelReply, st.integers(0, 7)),
    st.builds(
        StreamAbandon,
        targets,
        st.sampled_from(["record", "tool=slow", "tool=hang"]),
        st.integers(0, 3),
    ),
    st.builds(Control, targets, st.sampled_from([LoopDirective.BREAK, LoopDirective.CANCEL])),
    st.builds(Remove, targets),
    st.builds(Include, targets),
    st.builds(StopBranch, targets),
    st.builds(Wait, st.sampled_from([0.5, 1, 3])),
)


def command(kind: str, delay: int, me: int) -> Any:
    """The command a kind stands for (see tests/reliability/support.py)."""
    text = f"{kind} d={delay}"
    if kind == "chat":
        return Chat(text)
    if kind in ("record", "fail"):
        return ChatAndRecord(text)
    if kind.startswith("tool="):
        return Run(text)
    if kind == "nested":
        return Call("nested", text=text)
    if kind == "peer":
        return Call("peer", to=NAMES[1 - me], text=text)
    if kind == "crash":
        return Call("crash")
    if kind.startswith("act="):
        return Act([ActionCall(kind.removeprefix("act="), {"n": delay})])
    assert kind == "act", kind
    return Act([ActionCall("slow", {"n": delay})])


class Program:
    """The replay of one generated program against a two-branch session."""

    def __init__(self, session: Session, branches: list[Branch], checker: InvariantChecker) -> None:
        self.session = session
        self.branches = branches
        self.checker = checker
        self.callers: list[trio.CancelScope] = []
        self.replies: list[pride.Reply] = []
        self.unexpected: list[str] = []

    def outcome(self, what: Any, error: BaseException | None) -> None:
        if error is not None and not isinstance(error, ALLOWED_ERRORS):
            self.unexpected.append(f"{what}: {type(error).__name__}: {error}")

    async def ask(self, action: Ask | AskNow) -> None:
        branch = self.branches[action.target]
        try:
            await pride.ask(
                branch, command(action.kind, action.delay, action.target), action.timeout
            )
        except Exception as exc:
            self.outcome(action, exc)

    async def caller(self, action: Ask, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        with trio.CancelScope() as scope:
            self.callers.append(scope)
            task_status.started()
            await self.ask(action)

    async def stream(self, action: StreamAbandon) -> None:
        branch = self.branches[action.target]
        kind = "record" if action.kind == "record" else action.kind
        try:
            with trio.move_on_after(30):  # a hanging tool's stream is left by its consumer
                async with pride.stream(branch, command(kind, 1, action.target)) as items:
                    seen = 0
                    async for _ in items:
                        seen += 1
                        if seen > action.after:
                            break
        except Exception as exc:
            self.outcome(action, exc)

    async def step(self, action: Any, nursery: trio.Nursery) -> None:
        if isinstance(action, Send):
            branch = self.branches[action.target]
            try:
                reply = await pride.send(branch, command(action.kind, action.delay, action.target))
            except Exception as exc:
                self.outcome(action, exc)
            else:
                self.replies.append(reply)
        elif isinstance(action, Ask):
            await nursery.start(self.caller, action)
        elif isinstance(action, AskNow):
            await self.ask(action)
        elif isinstance(action, CancelCaller):
            if self.callers:
                self.callers[action.index % len(self.callers)].cancel()
        elif isinstance(action, CancelReply):
            if self.replies:
                self.replies[action.index % len(self.replies)].cancel()
        elif isinstance(action, StreamAbandon):
            await self.stream(action)
        elif isinstance(action, Control):
            self.branches[action.target].control(action.directive)
        elif isinstance(action, Remove):
            branch = self.branches[action.target]
            if branch in self.session.branches:
                await self.session.remove(branch)
        elif isinstance(action, Include):
            try:  # racing a Stop still queued behind a turn, include meets BranchClosed
                await self.session.include(self.branches[action.target])
            except Exception as exc:
                self.outcome(action, exc)
        elif isinstance(action, StopBranch):
            try:
                await pride.send(self.branches[action.target], Stop())
            except Exception as exc:
                self.outcome(action, exc)
        else:
            assert isinstance(action, Wait)
            await trio.sleep(action.seconds)

    async def collect(self) -> None:
        """Wait for every outstanding answer."""
        for reply in self.replies:
            try:
                await reply.result()
            except Exception as exc:
                self.outcome(reply, exc)

    async def finish(self) -> None:
        """Every branch, back in the session and running, must answer a final turn."""
        await trio.testing.wait_all_tasks_blocked()  # a queued Stop has been applied
        for branch in self.branches:
            await self.session.include(branch)  # back in, running, whatever happened
            assert await branch.chat_and_record("final") == "re: final"


class BranchWorld(RuleBasedStateMachine):
    """A session of two branches, driven by hypothesis one action per rule.

    The world lives in one trio run hosted by the test (``GuestRun``): each
    rule replays one action and returns once every task is blocked, the
    ordering invariants are checked after every rule, and the teardown ends
    the program with final turns or with a shutdown that has work in flight.
    """

    def __init__(self) -> None:
        super().__init__()
        self.checker = InvariantChecker()
        self.leftovers = Leftovers()
        self.exits = contextlib.ExitStack()
        self.exits.enter_context(self.checker.envelopes())
        self.shutdown: float | None = None
        self.steps = 0
        self.program_ended = trio.Event()
        self.callers_done = trio.Event()
        self.callers_hung = False
        self.trio = GuestRun(self.world, clock=trio.testing.MockClock(autojump_threshold=0))

    async def world(self, serve: Callable[[], Awaitable[None]]) -> None:
        session = Session(name="world", max_restarts=1_000, period=1.0)
        register_operations(session)
        session.observe(handler=self.checker.dispatch)
        self.branches = [
            Branch(name=name, chat_model=world_model(), tools=tools(self.leftovers))
            for name in NAMES
        ]
        for branch, peer in zip(self.branches, self.branches[::-1], strict=True):
            branch.register_tools(linked_tools(branch, peer))
        async with session:
            for branch in self.branches:
                await session.spawn(branch)
            async with trio.open_nursery() as hosts:
                self.callers = await hosts.start(self.host_callers)
                self.program = Program(session, self.branches, self.checker)
                await serve()

    async def host_callers(self, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """The nursery of the program's caller tasks, kept open until the program ends;
        then its callers get HANG_LIMIT virtual seconds to finish."""
        async with trio.open_nursery() as callers:
            task_status.started(callers)
            await self.program_ended.wait()
            callers.cancel_scope.deadline = trio.current_time() + HANG_LIMIT
        self.callers_hung = callers.cancel_scope.cancelled_caught
        self.callers_done.set()

    def bounded(self, what: str, job: Callable[[], Awaitable[None]]) -> None:
        """Run ``job`` in the world; more than HANG_LIMIT virtual seconds is a deadlock."""

        async def limited() -> None:
            with trio.move_on_after(HANG_LIMIT) as limit:
                await job()
            assert not limit.cancelled_caught, f"{what} hung"

        self.trio.call(limited)

    @initialize(shutdown=st.one_of(st.none(), st.none(), st.sampled_from([0.0, 0.5, 3.0])))
    def choose_ending(self, shutdown: float | None) -> None:
        """``None``: the program ends with a final turn per branch; a number: with a
        shutdown of that grace while work is still in flight."""
        self.shutdown = shutdown

    @rule(action=actions)
    def act(self, action: Any) -> None:
        self.steps += 1
        self.bounded(f"step {self.steps} {action}", lambda: self.program.step(action, self.callers))

    @invariant()
    def ordering_invariants_hold(self) -> None:
        self.checker.check()

    def teardown(self) -> None:
        try:
            self.end_program()
        finally:
            self.trio.abandon()  # after a failure: cancel whatever is left
            self.exits.close()

    def end_program(self) -> None:
        run = self.program
        if self.shutdown is not None:
            grace = self.shutdown
            self.bounded("the shutdown", lambda: run.session.stop(grace=grace))
        self.bounded("collecting the answers", run.collect)

        async def callers_finish() -> None:
            self.program_ended.set()
            await self.callers_done.wait()

        self.trio.call(callers_finish)
        assert not self.callers_hung, "a caller hung"
        if self.shutdown is None:
            self.bounded("the final turns", run.finish)
        self.trio.close()
        assert not run.unexpected, run.unexpected
        self.checker.check(*self.branches, quiescent=True)
        assert self.leftovers.running == 0, (
            f"{self.leftovers.running} leftover tasks were never cancelled"
        )
        for branch in self.branches:  # whatever happened, the conversation survives JSON
            restored = Branch.from_dict(json.loads(json.dumps(branch.to_dict("json"))))
            assert list(restored.messages) == list(branch.messages)


# Bounded and derandomized for `make test`. To hunt, RELIABILITY_EXAMPLES=5000
# runs more examples, with fresh randomness (pick one with --hypothesis-seed=N).
EXAMPLES = int(os.environ.get("RELIABILITY_EXAMPLES", "0"))

TestRandomProgramsKeepEveryInvariant = BranchWorld.TestCase
TestRandomProgramsKeepEveryInvariant.settings = settings(
    max_examples=EXAMPLES or 300,
    stateful_step_count=40 if EXAMPLES else 25,
    derandomize=not EXAMPLES,
    deadline=None,
)
