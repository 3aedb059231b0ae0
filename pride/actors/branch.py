"""Branch: one conversation, as an aggregate and as an actor.

The Branch object owns one conversation's state (ADR-0016 D1): its messages,
tools, models, logs and named operations, plus identity. Its verbs
(``chat``, ``operate``, ``ReAct``, ...) are thin adapters: each builds a
command and asks the branch's actor, which runs the algorithm from
:mod:`pride.operations` as one turn.

Run a standalone branch with ``async with Branch(...) as branch:`` (a
private supervisor), or hand it to a session with ``session.spawn(branch)``.
"""

from __future__ import annotations

import logging
import time
import uuid
import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, Self
from uuid import UUID

import trio

from ..errors import BranchClosed, BranchNotRunning, UnknownOperation
from ..llm import iModel
from ..messages import (
    DEFAULT_SYSTEM_MESSAGE,
    Act,
    ActionCall,
    Attach,
    Call,
    Chat,
    ChatAndRecord,
    Communicate,
    Interpret,
    MessageAdded,
    Operate,
    Parse,
    ReAct,
    ReActStream,
    RoledMessage,
    Run,
    Signal,
    Stop,
    System,
    WorkCommand,
)
from ..messages.history import History
from ..operations import execute as execute_operation
from ..operations.registry import OperationManager
from ..tools import ActionManager
from . import actor, turn
from .logs import DataLogger, LogConfig
from .mailbox import Mailbox, MailboxStatistics
from .send import ask, stream

if TYPE_CHECKING:
    import contextlib

    from .send import StreamItems

__all__ = ["DEFAULT_MAILBOX_SIZE", "Branch", "HookSink", "SignalSink", "live_branch"]

log = logging.getLogger("pride.branch")

DEFAULT_MAILBOX_SIZE = 64
"""Work envelopes a branch's mailbox holds before ``send`` waits."""

PRIDE_SYSTEM_MESSAGE = (
    "You are an agent running on pride, an actor runtime: each conversation is served "
    "one turn at a time. Use the tools you are offered when they help, and answer "
    "plainly when they do not."
)
"""pride's built-in preamble, prepended when ``use_lion_system_message=True``."""

_live: weakref.WeakValueDictionary[UUID, Branch] = weakref.WeakValueDictionary()


def live_branch(branch_id: UUID) -> Branch | None:
    """The branch with this id whose actor is running in this process, if any."""
    return _live.get(branch_id)


class SignalSink(Protocol):
    """What a branch needs of an observer (a session attaches a real one).

    ``dispatch`` runs synchronous subscribers at once (isolating their
    failures) and returns an awaitable for the asynchronous ones, or None.
    """

    def dispatch(self, signal: Signal) -> Any: ...


class HookSink(Protocol):
    """What a branch needs of a session's hook bus.

    ``emit(point, payload)`` returns None or an awaitable. For blocking points
    (``before_tool_call``) an exception denies the action; other points
    isolate handler failures themselves.
    """

    def emit(self, point: str, payload: Mapping[str, Any]) -> Any: ...


class Branch:
    """One conversation: its state, its facade verbs, and (while running) its actor.

    Args:
        user: who the conversation is with (an id or name).
        name: a stable, human name (sessions resolve names; stores key on it).
        messages: an initial history.
        system: the system prompt (str or :class:`~pride.System`). A system
            message exists only when ``system``, ``system_datetime`` or
            ``use_lion_system_message`` is truthy.
        system_sender: sender recorded on the system message.
        chat_model: ``"provider/model"``, a config dict, or an iModel; default
            from ``PRIDE_CHAT_MODEL`` (``openai/gpt-4.1-mini``).
        parse_model: same forms; default: the chat model object itself.
        tools: callables or Tools to register.
        log_config: a LogConfig or a dict of its fields.
        system_datetime: True for the current UTC time, or a timestamp string.
        system_template, system_template_context: accepted for compatibility;
            they warn ``DeprecationWarning`` and have no effect.
        logs: log entries to start from.
        use_lion_system_message: prepend pride's built-in preamble.
        memory: an explicit memory store, kept by identity.
        mailbox_size: work envelopes the mailbox holds before ``send`` waits.
        observer: a signal sink for standalone observation (sessions attach theirs).
    """

    def __init__(
        self,
        *,
        user: str | None = None,
        name: str | None = None,
        messages: Iterable[RoledMessage] | None = None,
        system: System | str | None = None,
        system_sender: str | None = None,
        chat_model: iModel | dict[str, Any] | str | None = None,
        parse_model: iModel | dict[str, Any] | str | None = None,
        tools: Any = None,
        log_config: LogConfig | Mapping[str, Any] | None = None,
        system_datetime: bool | str | None = None,
        system_template: Any = None,
        system_template_context: Mapping[str, Any] | None = None,
        logs: Iterable[Any] | None = None,
        use_lion_system_message: bool = False,
        memory: Any = None,
        mailbox_size: int = DEFAULT_MAILBOX_SIZE,
        observer: SignalSink | None = None,
        id: UUID | None = None,
        created_at: float | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        if mailbox_size < 1:
            raise ValueError(f"mailbox_size must be at least 1, got {mailbox_size}")
        if system_template is not None or system_template_context is not None:
            import warnings

            warnings.warn(
                "system_template and system_template_context are accepted for compatibility "
                "and have no effect",
                DeprecationWarning,
                stacklevel=2,
            )
        self.id: UUID = id if id is not None else uuid.uuid4()
        self.id_str = str(self.id)
        self.name: str = name if name is not None else f"branch-{str(self.id)[:8]}"
        self.user = user
        self.created_at: float = created_at if created_at is not None else time.time()
        self.metadata: dict[str, Any] = dict(metadata or {})
        self.mailbox_size = mailbox_size

        # The five managers (ADR-0016 D1).
        self._messages = History(messages or ())
        self._actions = ActionManager()
        self._chat_model = iModel.from_spec(chat_model)
        self._parse_model = (
            self._chat_model if parse_model is None else iModel.from_spec(parse_model)
        )
        self._logs = DataLogger(LogConfig.coerce(log_config), logs)
        self._operations = OperationManager()

        if tools:
            self._actions.register(tools)
        system_message = _make_system(system, system_datetime, use_lion_system_message)
        if system_message is not None:
            if system_sender is not None:
                import attrs

                system_message = attrs.evolve(system_message, sender=system_sender)
            self._messages.set_system(system_message)

        # Branch-scoped live extensions (created lazily).
        self._memory = memory
        self._providers: Any = None
        self._message_listeners: list[Callable[[Branch, RoledMessage], None]] = []

        # Session attachments (ADR-0016 D4), applied between turns by Attach/Detach.
        self._observer: SignalSink | None = observer
        self._hooks: HookSink | None = None
        self._owner_id: UUID | None = None
        self._owner_name: str | None = None
        self._directory: Any = None

        # Runtime state: never serialised.
        self._mailbox: Mailbox | None = None
        self._background: trio.Nursery | None = None
        self._active_turn: turn.TurnExecutionContext | None = None
        self._last_context_report: Any = None
        self._waiting_on: dict[Branch, int] = {}
        self._private_supervisor: trio.Nursery | None = None
        self._private_cm: Any = None

    def __repr__(self) -> str:
        state = "running" if self.running else "idle"
        return f"<Branch {self.name!r} {state}, {len(self._messages)} messages>"

    # ------------------------------------------------------------ managers

    @property
    def messages(self) -> History:
        """The recorded conversation, in order (``len()``, iteration, indexing)."""
        return self._messages

    @property
    def msgs(self) -> History:
        """Alias of :attr:`messages` (the reference system's name)."""
        return self._messages

    @property
    def system(self) -> System | None:
        """The conversation's system message, if any."""
        return self._messages.system

    @property
    def acts(self) -> ActionManager:
        """The tool registry (the action manager)."""
        return self._actions

    @property
    def tools(self) -> Mapping[str, Any]:
        """Registered tools by name."""
        return self._actions.tools

    def register_tools(self, tools: Any, *, update: bool = False) -> None:
        """Register callables or Tools; duplicate names raise unless ``update``."""
        self._actions.register(tools, update=update)

    @property
    def chat_model(self) -> iModel:
        """The model turns use unless a command overrides it.

        Settable (a spec or an iModel); a change applies to turns that start
        after it, never to a running turn.
        """
        return self._chat_model

    @chat_model.setter
    def chat_model(self, value: iModel | dict[str, Any] | str) -> None:
        self._chat_model = iModel.from_spec(value)

    @property
    def parse_model(self) -> iModel:
        """The model used to reformat unparseable replies (default: the chat model)."""
        return self._parse_model

    @parse_model.setter
    def parse_model(self, value: iModel | dict[str, Any] | str) -> None:
        self._parse_model = iModel.from_spec(value)

    @property
    def logs(self) -> DataLogger:
        """Model and tool call records (bounded by the log config's capacity)."""
        return self._logs

    def dump_logs(self, path: Any = None, *, clear: bool = True) -> Any:
        """Write the logs as JSON lines to ``path`` (see :meth:`DataLogger.dump`)."""
        return self._logs.dump(path, clear=clear)

    @property
    def operations(self) -> OperationManager:
        """The named-operation registry (shared with the session while attached)."""
        return self._operations

    def register_operation(
        self, name: str, operation: Callable[..., Any], *, update: bool = False
    ) -> None:
        """Register ``async def operation(branch, **kwargs)`` under ``name``.

        Raises:
            ValueError: ``name`` is taken (unless ``update``) or shadows an attribute.
            TypeError: ``operation`` is not an async function.
        """
        self._operations.register(name, operation, update=update)

    def get_operation(self, name: str) -> Callable[..., Any] | None:
        """The operation called ``name``: a Branch attribute first, then the registry."""
        if hasattr(self, name):
            found: Callable[..., Any] = getattr(self, name)
            return found
        return self._operations.get(name)

    # ------------------------------------------------------------ messages

    def add_message(self, message: RoledMessage) -> RoledMessage:
        """Record ``message`` and tell observers, hooks and listeners.

        Returns the message. A system message replaces the current one.
        """
        self._messages.append(message)
        for listener in self._message_listeners:
            try:
                listener(self, message)
            except Exception:
                log.exception("message listener of branch %r failed", self.name)
        if self._observer is not None:
            scope = turn.live_scope_for(self)
            self._schedule_signal(
                MessageAdded(
                    branch_id=self.id,
                    branch_name=self.name,
                    message=message,
                    turn_id=scope.turn_id if scope is not None else None,
                )
            )
        if self._hooks is not None:
            self.fire_hook("message_added", {"branch": self, "message": message})
        return message

    def add_message_listener(self, listener: Callable[[Branch, RoledMessage], None]) -> None:
        """Call ``listener(branch, message)`` synchronously for every recorded message."""
        self._message_listeners.append(listener)

    def remove_message_listener(self, listener: Callable[[Branch, RoledMessage], None]) -> None:
        """Stop calling ``listener``."""
        self._message_listeners.remove(listener)

    # ------------------------------------------------------------ signals

    async def _emit_lifecycle(self, signal: Signal) -> None:
        """Deliver a lifecycle signal and wait for its async subscribers."""
        observer = self._observer
        if observer is None:
            return
        try:
            pending = observer.dispatch(signal)
            if pending is not None:
                await pending
        except Exception:
            log.exception("observer failed on %s of branch %r", type(signal).__name__, self.name)

    def emit(self, signal: Signal) -> None:
        """Deliver ``signal`` to the attached observer.

        Inside a live turn its async subscribers are drained before the
        turn's terminal signal; outside one they run as best-effort
        background work of the actor.
        """
        if self._observer is not None:
            self._schedule_signal(signal)

    def _schedule_signal(self, signal: Signal) -> None:
        assert self._observer is not None
        try:
            pending = self._observer.dispatch(signal)
        except Exception:
            log.exception("observer failed on %s of branch %r", type(signal).__name__, self.name)
            return
        if pending is not None:
            self._spawn_signal_work(pending, type(signal).__name__)

    def fire_hook(self, point: str, payload: Mapping[str, Any]) -> None:
        """Fire a non-blocking hook point; async handlers join the turn's signal drain."""
        hooks = self._hooks
        if hooks is None:
            return
        try:
            pending = hooks.emit(point, payload)
        except Exception:
            log.exception("hook %s of branch %r failed", point, self.name)
            return
        if pending is not None:
            self._spawn_signal_work(pending, f"hook {point}")

    async def run_hook(self, point: str, payload: Mapping[str, Any]) -> None:
        """Run a hook point and wait for it; exceptions propagate (blocking points)."""
        hooks = self._hooks
        if hooks is None:
            return
        pending = hooks.emit(point, payload)
        if pending is not None:
            await pending

    def _spawn_signal_work(self, pending: Any, what: str) -> None:
        scope = turn.live_scope_for(self)
        if scope is not None and scope.context.host is not None:
            group = scope.context.signal_group()
            group.start_soon(_isolated, pending, f"{what} of branch {self.name!r}")
            return
        nursery = self._background
        if nursery is None:
            pending.close()
            log.warning(
                "branch %r: async subscribers of %s dropped (no running actor to host them)",
                self.name,
                what,
            )
            return
        nursery.start_soon(_isolated, pending, f"{what} of branch {self.name!r}")

    # ---------------------------------------------------------- attachments

    def _attach(self, command: Attach) -> None:
        self._owner_id = command.owner_id
        self._owner_name = command.owner_name
        self._observer = command.observer
        self._hooks = command.hooks
        self._directory = command.directory
        if command.operations is not None:
            self._operations = command.operations
        if self._memory is None and command.memory is not None:
            self._memory = command.memory  # first claim: never replace a store in use

    def _detach(self) -> None:
        self._owner_id = None
        self._owner_name = None
        self._observer = None
        self._hooks = None
        self._directory = None
        self._operations = OperationManager()

    @property
    def owner_id(self) -> UUID | None:
        """The id of the session this branch belongs to, if any."""
        return self._owner_id

    # ------------------------------------------------------------- control

    def control(
        self, directive: Any, *, reason: str | None = None, turn_id: UUID | None = None
    ) -> bool:
        """Write a loop directive into the active turn (ADR-0018 D3); never queues.

        Returns False, storing nothing, when no turn is active (or it is
        finalising) or ``turn_id`` names another turn. Last write wins.

        Raises:
            TypeError: ``directive`` is not a LoopDirective, or ``turn_id`` not a UUID.
        """
        if not isinstance(directive, turn.LoopDirective):
            raise TypeError(f"directive must be a LoopDirective, got {type(directive).__name__}")
        context = self._addressed_turn(turn_id)
        if context is None:
            return False
        context.control = turn.LoopControl(directive, reason)
        return True

    def poll_control(self, *, turn_id: UUID | None = None) -> turn.LoopControl | None:
        """Take the active turn's pending directive (clearing it), if any."""
        context = self._addressed_turn(turn_id)
        if context is None:
            return None
        control, context.control = context.control, None
        return control

    def _addressed_turn(self, turn_id: UUID | None) -> turn.TurnExecutionContext | None:
        if turn_id is not None and not isinstance(turn_id, UUID):
            raise TypeError(f"turn_id must be a UUID, got {type(turn_id).__name__}")
        context = self._active_turn
        if context is None or context.phase != "active":
            return None
        if turn_id is not None and turn_id != context.turn_id:
            return None
        return context

    @property
    def active_turn_id(self) -> UUID | None:
        """The id of the turn running now, if any."""
        context = self._active_turn
        return context.turn_id if context is not None else None

    @property
    def last_context_report(self) -> Any:
        """The context-provider report of the last finished top-level turn.

        Published when that turn finalises (before its caller's ``ask``
        returns); None after a turn with no providers.
        """
        return self._last_context_report

    # --------------------------------------------------------------- actor

    @property
    def running(self) -> bool:
        """True while the branch's mailbox accepts commands."""
        return self._mailbox is not None and not self._mailbox.closed

    def mailbox_statistics(self) -> MailboxStatistics | None:
        """A snapshot of the mailbox, or None if the actor never started."""
        return self._mailbox.statistics() if self._mailbox is not None else None

    def _require_mailbox(self) -> Mailbox:
        mailbox = self._mailbox
        if mailbox is None:
            raise BranchNotRunning(self.name)
        if mailbox.closed:
            raise BranchClosed(self.name)
        return mailbox

    def _open_mailbox(self) -> Mailbox:
        """The mailbox to serve: the current one if still open, else a new one."""
        if self._mailbox is None or self._mailbox.closed:
            self._mailbox = Mailbox(self.name, self.mailbox_size)
        _live[self.id] = self
        return self._mailbox

    def _close_mailbox(self, detail: str) -> None:
        """Close the mailbox and answer everything queued with BranchClosed."""
        mailbox = self._mailbox
        if mailbox is None or mailbox.closed:
            return
        pending = mailbox.close()
        for reply in pending:
            if reply.state != "dropped":
                reply.fail(BranchClosed(self.name, detail))
        if pending:
            log.info(
                "branch %r: answered %d queued envelopes with BranchClosed", self.name, len(pending)
            )
        _live.pop(self.id, None)

    async def serve(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> str:
        """Run this branch's actor in the calling task until it is stopped.

        For supervisors: ``await nursery.start(branch.serve)`` returns once the
        actor accepts commands. Returns the stop reason.
        """
        mailbox = self._open_mailbox()
        return await actor.serve(self, mailbox, task_status=task_status)

    async def __aenter__(self) -> Self:
        if self.running:
            raise RuntimeError(f"branch {self.name!r} is already running")
        cm = trio.open_nursery()
        nursery = await cm.__aenter__()
        self._private_cm = cm
        self._private_supervisor = nursery
        try:
            await nursery.start(self.serve)
        except BaseException as exc:
            await cm.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        return self

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        cm, self._private_cm = self._private_cm, None
        self._private_supervisor = None
        mailbox = self._mailbox
        if mailbox is not None and not mailbox.closed:
            # Stop after the current turn; queued envelopes are answered BranchClosed.
            mailbox.put_priority(_make_reply(self, Stop()))
        try:
            return await _exit_unwrapped(cm, exc_info)  # type: ignore[no-any-return]
        finally:
            self._close_mailbox("the branch's actor exited")

    # --------------------------------------------------------------- verbs

    async def _run_inline(self, command: WorkCommand, scope: turn.TurnScope | None) -> Any:
        """Run ``command``'s operation in the calling task (the driver or a nested call)."""
        if isinstance(command, Call):
            name = command.operation
            if hasattr(self, name):  # attribute first: a bound verb takes no branch argument
                return await getattr(self, name)(**command.kwargs)
            operation = self._operations.get(name)
            if operation is None:
                raise UnknownOperation(name)
            return await operation(self, **command.kwargs)
        return await execute_operation(self, command, scope)

    async def chat(self, instruction: str = "", *, timeout: float | None = None, **kw: Any) -> Any:
        """One model call over the history; records nothing. See :class:`~pride.Chat`."""
        return await ask(self, Chat(instruction, **kw), timeout)

    async def chat_and_record(
        self, instruction: str = "", *, timeout: float | None = None, **kw: Any
    ) -> Any:
        """Chat, then record the instruction and response. See :class:`~pride.ChatAndRecord`."""
        return await ask(self, ChatAndRecord(instruction, **kw), timeout)

    async def communicate(
        self, instruction: str = "", *, timeout: float | None = None, **kw: Any
    ) -> Any:
        """Chat, record both messages, optionally parse. See :class:`~pride.Communicate`."""
        return await ask(self, Communicate(instruction, **kw), timeout)

    async def operate(
        self, instruction: str = "", *, timeout: float | None = None, **kw: Any
    ) -> Any:
        """A structured turn with optional tool actions. See :class:`~pride.Operate`."""
        return await ask(self, Operate(instruction, **kw), timeout)

    async def parse(self, text: str, *, timeout: float | None = None, **kw: Any) -> Any:
        """Parse text into a response format. See :class:`~pride.Parse`."""
        return await ask(self, Parse(text, **kw), timeout)

    async def interpret(self, text: str, *, timeout: float | None = None, **kw: Any) -> Any:
        """Rewrite raw input into a clearer prompt. See :class:`~pride.Interpret`."""
        return await ask(self, Interpret(text, **kw), timeout)

    async def act(self, action_request: Any, *, timeout: float | None = None, **kw: Any) -> Any:
        """Execute tool calls and record them. See :class:`~pride.Act`.

        ``action_request`` is one call or a list of calls, each an
        :class:`~pride.ActionCall`, a ``{"function", "arguments"}`` dict, or a
        tool-call object with ``name``/``arguments``.
        """
        calls = action_request if isinstance(action_request, list | tuple) else [action_request]
        requests = tuple(_action_call(call) for call in calls)
        return await ask(self, Act(requests, **kw), timeout)

    async def ReAct(self, instruction: str = "", *, timeout: float | None = None, **kw: Any) -> Any:
        """Think-act-observe, then answer. See :class:`~pride.ReAct`."""
        return await ask(self, ReAct(instruction, **kw), timeout)

    def ReActStream(
        self, instruction: str = "", **kw: Any
    ) -> contextlib.AbstractAsyncContextManager[StreamItems]:
        """``async with branch.ReActStream(...) as rounds:`` — see :class:`~pride.ReActStream`."""
        return stream(self, ReActStream(instruction, **kw))

    def run(
        self, instruction: str = "", **kw: Any
    ) -> contextlib.AbstractAsyncContextManager[StreamItems]:
        """``async with branch.run(...) as items:`` — see :class:`~pride.Run`."""
        return stream(self, Run(instruction, **kw))

    async def call(self, operation: str, /, *, timeout: float | None = None, **kw: Any) -> Any:
        """Run a registered operation as a turn. See :class:`~pride.Call`."""
        return await ask(self, Call(operation, **kw), timeout)


# ------------------------------------------------------------------ helpers


def _make_system(
    system: System | str | None, system_datetime: bool | str | None, lion: bool
) -> System | None:
    if not (system or system_datetime or lion):
        return None
    if isinstance(system, System):
        base = system
    else:
        base = System(system_message=system or DEFAULT_SYSTEM_MESSAGE)
    stamp: str | None = base.system_datetime
    if system_datetime is True:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    elif isinstance(system_datetime, str) and system_datetime:
        stamp = system_datetime
    text = base.system_message
    if lion:
        text = f"{PRIDE_SYSTEM_MESSAGE}\n\n{text}" if system else PRIDE_SYSTEM_MESSAGE
    import attrs

    return attrs.evolve(base, system_message=text, system_datetime=stamp)


def _action_call(call: Any) -> ActionCall:
    if isinstance(call, ActionCall):
        return call
    if isinstance(call, Mapping):
        return ActionCall(call["function"], dict(call.get("arguments") or {}), call.get("call_id"))
    name = getattr(call, "name", None) or getattr(call, "function", None)
    if isinstance(name, str):
        return ActionCall(
            name, dict(getattr(call, "arguments", {}) or {}), getattr(call, "id", None)
        )
    raise TypeError(f"cannot read an action request from {type(call).__name__}")


def _make_reply(branch: Branch, command: Any) -> Any:
    from .mailbox import Reply

    return Reply(branch, command)


async def _isolated(pending: Any, what: str) -> None:
    try:
        await pending
    except Exception:
        log.exception("async subscriber of %s failed", what)


async def _exit_unwrapped(cm: Any, exc_info: tuple[Any, ...]) -> Any:
    """Leave a private nursery, re-raising a lone crash bare rather than as a group."""
    try:
        return await cm.__aexit__(*exc_info)
    except BaseExceptionGroup as group:
        leaves = _leaves(group)
        if len(leaves) == 1:
            raise leaves[0] from None
        raise


def _leaves(group: BaseExceptionGroup[Any]) -> list[BaseException]:
    found: list[BaseException] = []
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            found.extend(_leaves(exc))
        else:
            found.append(exc)
    return found
