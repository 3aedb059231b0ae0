"""The invariant checker: what must hold of every branch, whatever happens to it.

:class:`InvariantChecker` is a signal sink (give it to ``Branch(observer=...)``
or ``session.observe(handler=checker.dispatch)``) and, inside
:meth:`InvariantChecker.envelopes`, a recorder of every :class:`~pride.Reply`
created and of every answer it gets. Per branch it asserts:

1. **Serial turns**: no ``RunStart`` while the branch's previous turn has no
   terminal yet.
2. **One terminal**: every ``RunStart`` gets exactly one ``RunEnd`` or
   ``RunFailed`` with its ``turn_id``; no terminal without a start. An actor
   that stops (``BranchStopped``) has no turn left open.
3. **Messages inside their turn**: a ``MessageAdded`` (and a capability
   signal) carrying a ``turn_id`` arrives between that turn's ``RunStart``
   and its terminal. Messages recorded outside turns (``Act``) carry no
   turn id; one of those arriving while a turn is open is reported too
   (``allow_untracked`` lifts that).
4. **One answer per envelope**: every Reply queued is answered (a result, an
   error, ``BranchClosed`` or ``TurnCancelled``) exactly once, is never started
   after it was answered, and a turn's answer agrees with its terminal
   (``RunEnd``: a result; ``RunFailed``: an error of the type it names).
5. **History = signals**: a branch's recorded messages are, in order, its
   baseline followed by what its ``MessageAdded`` signals reported.
6. **History stays sendable**: in both provider shapes, every native tool
   call is answered (a tool result for each id) before the conversation
   moves on, and no result answers a call that is not open; providers
   reject anything else, so one broken pair would fail every later turn.

Ordering properties (1-3) are checked as signals arrive; :meth:`check`
raises ``AssertionError`` listing every violation so far and, with
``quiescent=True`` (nothing may be in flight any more), also checks 2's "no
turn left open", 4, 5 and 6. :meth:`prune` forgets what was verified, for long
runs (the soak benchmark).

Envelope recording wraps ``Reply.__init__``, ``start``, ``succeed`` and
``fail`` for the duration of the ``with`` block: every envelope is seen,
including those made inside ``ask``, the facade verbs and the supervisors.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import Any
from uuid import UUID

import attrs

from pride import (
    Branch,
    BranchStopped,
    MessageAdded,
    Reply,
    RunEnd,
    RunFailed,
    RunStart,
    Signal,
)

__all__ = ["InvariantChecker", "sendable_problems"]

_TERMINALS = (RunEnd, RunFailed)


@attrs.define
class _Turn:
    branch: str
    started: bool = False
    terminal: Signal | None = None


@attrs.define
class _BranchLog:
    name: str
    open_turn: UUID | None = None
    reported: list[UUID] = attrs.field(factory=list)  # message ids, in MessageAdded order
    baseline: list[UUID] | None = None


@attrs.define(eq=False)
class _Envelope:
    reply: Reply
    answers: list[tuple[str, Any]] = attrs.field(factory=list)  # ("result"|"error", value)
    late: list[tuple[str, Any]] = attrs.field(factory=list)  # answers after the first
    started_after_answer: bool = False


class InvariantChecker:
    """Records signals and envelopes; :meth:`check` asserts the invariants above.

    Args:
        allow_untracked: accept messages without a turn id while a turn of
            the same branch is open (someone recorded directly, outside turns).
        keep_signals: keep every signal in :attr:`signals` (off for soaks).
    """

    def __init__(self, *, allow_untracked: bool = False, keep_signals: bool = True) -> None:
        self.allow_untracked = allow_untracked
        self.keep_signals = keep_signals
        self.signals: list[Signal] = []
        self.violations: list[str] = []
        self.turns_checked = 0
        self.envelopes_checked = 0
        self._turns: dict[UUID, _Turn] = {}
        self._branches: dict[UUID, _BranchLog] = {}
        self._envelopes: dict[int, _Envelope] = {}

    # ------------------------------------------------------------ signals

    def dispatch(self, signal: Signal) -> None:
        """Take one signal (the SignalSink protocol, and an observer handler)."""
        if self.keep_signals:
            self.signals.append(signal)
        if signal.branch_id is None:
            return  # a session's own signal (SessionFailed)
        log = self._branch_log(signal.branch_id, signal.branch_name)
        if isinstance(signal, RunStart):
            self._on_start(log, signal)
        elif isinstance(signal, _TERMINALS):
            self._on_terminal(log, signal)
        elif isinstance(signal, MessageAdded):
            self._in_turn(log, signal, signal.turn_id)
            log.reported.append(signal.message.id)
        elif isinstance(signal, BranchStopped):
            if log.open_turn is not None:
                self._violate(
                    f"{log.name}: actor stopped ({signal.reason}) with turn "
                    f"{log.open_turn} still open"
                )
        elif hasattr(signal, "turn_id"):  # capability signals
            self._in_turn(log, signal, signal.turn_id)

    def _branch_log(self, branch_id: UUID, name: str | None) -> _BranchLog:
        log = self._branches.get(branch_id)
        if log is None:
            log = self._branches[branch_id] = _BranchLog(name or str(branch_id))
        return log

    def _on_start(self, log: _BranchLog, signal: RunStart) -> None:
        turn_id = signal.turn_id
        if turn_id is None:
            self._violate(f"{log.name}: RunStart without a turn_id")
            return
        if log.open_turn is not None:
            self._violate(f"{log.name}: turn {turn_id} started while {log.open_turn} is open")
        if turn_id in self._turns:
            self._violate(f"{log.name}: second RunStart for turn {turn_id}")
        self._turns[turn_id] = _Turn(log.name, started=True)
        log.open_turn = turn_id

    def _on_terminal(self, log: _BranchLog, signal: RunEnd | RunFailed) -> None:
        turn_id = signal.turn_id
        kind = type(signal).__name__
        record = self._turns.get(turn_id) if turn_id is not None else None
        if record is None:
            self._violate(f"{log.name}: {kind} for turn {turn_id} that never started")
            return
        if record.terminal is not None:
            self._violate(
                f"{log.name}: second terminal for turn {turn_id} "
                f"({type(record.terminal).__name__}, then {kind})"
            )
            return
        record.terminal = signal
        if log.open_turn != turn_id:
            self._violate(f"{log.name}: {kind} for {turn_id} while {log.open_turn} is open")
        else:
            log.open_turn = None

    def _in_turn(self, log: _BranchLog, signal: Signal, turn_id: UUID | None) -> None:
        kind = type(signal).__name__
        if turn_id is None:
            if log.open_turn is not None and not self.allow_untracked:
                self._violate(f"{log.name}: {kind} without a turn id during turn {log.open_turn}")
            return
        if log.open_turn != turn_id:
            record = self._turns.get(turn_id)
            where = (
                "before its RunStart"
                if record is None
                else "after its terminal"
                if record.terminal is not None
                else f"while {log.open_turn} is open"
            )
            self._violate(f"{log.name}: {kind} of turn {turn_id} arrived {where}")

    # ------------------------------------------------------------ envelopes

    @contextlib.contextmanager
    def envelopes(self) -> Iterator[InvariantChecker]:
        """Record every Reply made, started and answered inside the block."""
        originals = {
            name: getattr(Reply, name) for name in ("__init__", "start", "succeed", "fail")
        }
        envelopes = self._envelopes

        def init(reply: Reply, *args: Any, **kwargs: Any) -> None:
            originals["__init__"](reply, *args, **kwargs)
            envelopes[id(reply)] = _Envelope(reply)

        def start(reply: Reply, *args: Any, **kwargs: Any) -> None:
            envelope = envelopes.get(id(reply))
            if envelope is not None and reply.done:
                envelope.started_after_answer = True
            originals["start"](reply, *args, **kwargs)

        def answer(kind: str, method: str) -> Any:
            def record(reply: Reply, value: Any) -> None:
                was_done = reply.done
                originals[method](reply, value)
                envelope = envelopes.get(id(reply))
                if envelope is not None:
                    (envelope.late if was_done else envelope.answers).append((kind, value))

            return record

        patched = {
            "__init__": init,
            "start": start,
            "succeed": answer("result", "succeed"),
            "fail": answer("error", "fail"),
        }
        for name, function in patched.items():
            setattr(Reply, name, function)
        try:
            yield self
        finally:
            for name, function in originals.items():
                setattr(Reply, name, function)

    @property
    def pending(self) -> list[Reply]:
        """Recorded envelopes not answered yet."""
        return [e.reply for e in self._envelopes.values() if not e.reply.done]

    # ------------------------------------------------------------ checking

    def baseline(self, branch: Branch) -> None:
        """Take ``branch``'s current messages as the history its signals continue."""
        self._branch_log(branch.id, branch.name).baseline = [m.id for m in branch.messages]

    def check(self, *branches: Branch, quiescent: bool = False) -> None:
        """Assert every invariant; raise ``AssertionError`` listing the violations.

        Args:
            branches: branches whose history must equal their signals
                (checked only when ``quiescent``).
            quiescent: nothing is in flight any more: also require every turn
                closed, every envelope answered once and agreeing with its
                terminal, and the histories.
        """
        problems = list(self.violations)
        if quiescent:
            problems += self._quiescent_problems(branches)
        if problems:
            shown = "\n  ".join(problems[:30])
            more = f"\n  ... and {len(problems) - 30} more" if len(problems) > 30 else ""
            raise AssertionError(f"{len(problems)} invariant violations:\n  {shown}{more}")

    def _quiescent_problems(self, branches: Iterable[Branch]) -> list[str]:
        problems = []
        for log in self._branches.values():
            if log.open_turn is not None:
                problems.append(f"{log.name}: turn {log.open_turn} never reached a terminal")
        for envelope in self._envelopes.values():
            problems += self._envelope_problems(envelope)
        for branch in branches:
            problems += self._history_problems(branch)
        return problems

    def _history_problems(self, branch: Branch) -> list[str]:
        log = self._branch_log(branch.id, branch.name)
        expected = [*(log.baseline or ()), *log.reported]
        actual = [m.id for m in branch.messages]
        problems = sendable_problems(branch)
        if actual != expected:
            problems.append(
                f"{branch.name}: history ({len(actual)} messages) differs from baseline + "
                f"MessageAdded ({len(expected)}); first difference at "
                f"{_first_difference(actual, expected)}"
            )
        return problems

    def _envelope_problems(self, envelope: _Envelope) -> list[str]:
        reply = envelope.reply
        problems = []
        if not envelope.answers and (reply.state != "queued" or reply.branch.running):
            # (A queued reply of a branch whose mailbox has closed was never in it: the
            # mailbox answers everything it holds when it closes. That is a send
            # cancelled before it could queue, which hands no reply to anyone.)
            problems.append(f"{reply!r} was never answered")
        if envelope.started_after_answer:
            problems.append(f"{reply!r} was started after it had been answered")
        if envelope.late:
            kinds = ", ".join(_describe(kind, value) for kind, value in envelope.late)
            first = _describe(*envelope.answers[0]) if envelope.answers else "nothing"
            problems.append(f"{reply!r} answered {first}, then again: {kinds}")
        turn_id = reply.turn_id
        record = self._turns.get(turn_id) if turn_id is not None else None
        if record is not None and record.terminal is not None and envelope.answers:
            kind, value = envelope.answers[0]
            terminal = record.terminal
            if isinstance(terminal, RunEnd) and kind != "result":
                problems.append(f"{reply!r}: RunEnd, but the caller got {_describe(kind, value)}")
            if isinstance(terminal, RunFailed) and (
                kind != "error" or type(value).__name__ != terminal.error_type
            ):
                problems.append(
                    f"{reply!r}: RunFailed({terminal.error_type}), but the caller got "
                    f"{_describe(kind, value)}"
                )
        return problems

    def prune(self) -> None:
        """Forget closed turns and answered envelopes after checking them.

        Violations found stay in :attr:`violations`; reported histories are
        kept (call :meth:`baseline` again to restart a branch's history).
        """
        for key, envelope in list(self._envelopes.items()):
            if envelope.reply.done:
                self.violations += self._envelope_problems(envelope)
                del self._envelopes[key]
                self.envelopes_checked += 1
        for turn_id, record in list(self._turns.items()):
            if record.terminal is not None:
                del self._turns[turn_id]
                self.turns_checked += 1
        self.signals.clear()

    def forget(self, branch: Branch) -> None:
        """Check a retired branch (no open turn, history = signals), then drop its record."""
        log = self._branches.get(branch.id)
        if log is None:
            return
        if log.open_turn is not None:
            self._violate(f"{log.name}: forgotten with turn {log.open_turn} open")
        self.violations += self._history_problems(branch)
        del self._branches[branch.id]

    def turn_ids(self, branch: Branch) -> list[UUID]:
        """The turns started on ``branch`` that the checker still remembers, in order."""
        return [
            s.turn_id
            for s in self.signals
            if isinstance(s, RunStart) and s.branch_id == branch.id and s.turn_id is not None
        ]

    def _violate(self, text: str) -> None:
        self.violations.append(text)


def sendable_problems(branch: Branch) -> list[str]:
    """Tool calls left unanswered (or answers without a call) in either provider shape."""
    problems = []
    open_calls: list[str] = []
    for index, entry in enumerate(branch.messages.compile("openai")):
        if entry["role"] == "tool":
            if entry.get("tool_call_id") in open_calls:
                open_calls.remove(entry["tool_call_id"])
            else:
                problems.append(f"{branch.name}: openai entry {index} answers no open call")
            continue
        if open_calls:
            problems.append(f"{branch.name}: openai calls {open_calls} unanswered at {index}")
        open_calls = [call["id"] for call in entry.get("tool_calls") or ()]
    if open_calls:
        problems.append(f"{branch.name}: openai calls {open_calls} unanswered at the end")
    open_calls = []
    for index, entry in enumerate(branch.messages.compile("anthropic")):
        content = entry["content"] if isinstance(entry["content"], list) else []
        kinds = [block.get("type") for block in content]
        results = [b.get("tool_use_id") for b in content if b.get("type") == "tool_result"]
        if sorted(results) != sorted(open_calls) or kinds[: len(results)] != ["tool_result"] * len(
            results
        ):
            problems.append(
                f"{branch.name}: anthropic entry {index} answers {results}, open: {open_calls}"
            )
        open_calls = [b["id"] for b in content if b.get("type") == "tool_use"]
    if open_calls:
        problems.append(f"{branch.name}: anthropic calls {open_calls} unanswered at the end")
    return problems


def _describe(kind: str, value: Any) -> str:
    if kind == "error":
        return f"error {type(value).__name__}({value})"
    return f"result {value!r:.60}"


def _first_difference(actual: list[Any], expected: list[Any]) -> int:
    for index, (left, right) in enumerate(zip(actual, expected, strict=False)):
        if left != right:
            return index
    return min(len(actual), len(expected))
