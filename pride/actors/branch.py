"""Branch: one conversation, as an aggregate and as an actor.

The Branch object owns one conversation's state (ADR-0016 D1): its messages,
tools, models, logs and named operations, plus identity. Its verbs
(``chat``, ``operate``, ``ReAct``, ...) are thin adapters: each builds a
command and asks the branch's actor, which runs the algorithm from
`pride.operations` as one turn.

Run a standalone branch with ``async with Branch(...) as branch:`` (a
private supervisor), or hand it to a session with ``session.spawn(branch)``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Self
from uuid import UUID

import trio

from ..context import CapabilityGrant, ContextProviderRegistry
from ..llm import iModel
from ..memory import InMemoryStore, MemoryStore, is_memory_store
from ..messages import (
    Budget,
    RoledMessage,
    Signal,
    System,
    Usage,
    commands as cmd,
)
from ..messages.coerce import PRIDE_SYSTEM_MESSAGE, action_calls, system_message
from ..messages.history import History
from ..operations.registry import OperationManager
from ..tools import ActionManager
from . import (
    connect as connecting,
    control as controls,
    grants,
    projection,
    recording,
    standalone,
    turn,
    waits,
    wiring,
)
from .actor import Actor, StopReason
from .facade import first_converted, stream_verb, verb
from .logs import DataLogger, LogConfig
from .mailbox import MailboxStatistics, Reply
from .nursery import PrivateNursery
from .target import live_target
from .wiring import HookSink, SignalSink

if TYPE_CHECKING:
    from .target import Target

__all__ = [
    "DEFAULT_MAILBOX_SIZE",
    "PRIDE_SYSTEM_MESSAGE",
    "Branch",
    "HookSink",
    "SignalSink",
    "live_branch",
]

DEFAULT_MAILBOX_SIZE = 64
"""Work envelopes a branch's mailbox holds before ``send`` waits."""


def live_branch(branch_id: UUID) -> Branch | None:
    """The branch with this id whose actor is running in this process, if any."""
    found: Branch | None = live_target(branch_id)
    return found


class Branch:
    """One conversation: its state, its facade verbs, and (while running) its actor.

    Args:
        user: who the conversation is with (an id or name).
        name: a stable, human name (sessions resolve names; stores key on it);
            by default ``branch-`` and the first 12 hex digits of its id.
        messages: an initial history.
        system: the system prompt (str or [`System`][pride.System]). A system
            message exists only when ``system``, ``system_datetime`` or
            ``use_lion_system_message`` is truthy.
        system_sender: sender recorded on the system message.
        chat_model: ``"provider/model"``, a config dict, or an iModel; default
            from ``PRIDE_CHAT_MODEL`` (``openai/gpt-4.1-mini``).
        parse_model: same forms; default: the chat model object itself.
        tools: callables or Tools to register.
        log_config: a LogConfig or a dict of its fields.
        system_datetime: True for the current UTC time, or a timestamp string.
        system_template: accepted for compatibility; a non-None value warns
            ``DeprecationWarning`` and has no effect.
        system_template_context: the same.
        logs: log entries to start from.
        use_lion_system_message: prepend pride's built-in preamble.
        memory: an explicit memory store, kept by identity.
        mailbox_size: work envelopes the mailbox holds before ``send`` waits.
        observer: a signal sink for standalone observation (sessions attach theirs).
        budget: a [`Budget`][pride.Budget] for each of its turns (a fresh
            allowance every turn; a command's own ``budget`` replaces it).
    """

    # Slots, not a __dict__: an idle branch should cost little (100,000 of
    # them is a benchmark target). Subclasses get a __dict__ unless they
    # declare slots too.
    __slots__ = (
        "__weakref__",
        "_actions",
        "_actor",
        "_capabilities",
        "_chat_model",
        "_logs",
        "_memory",
        "_message_listeners",
        "_messages",
        "_name",
        "_operations",
        "_parse_model",
        "_private",
        "_providers",
        "_rewrite_listeners",
        "budget",
        "created_at",
        "id",
        "id_str",
        "mailbox_size",
        "metadata",
        "stable_name",
        "user",
    )

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
        memory: MemoryStore | None = None,
        mailbox_size: int = DEFAULT_MAILBOX_SIZE,
        observer: SignalSink | None = None,
        id: UUID | None = None,
        created_at: float | None = None,
        metadata: Mapping[str, Any] | None = None,
        budget: Budget | None = None,
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
        self._name: str = name if name is not None else f"branch-{self.id.hex[:12]}"
        self.stable_name = name is not None  # a store restores only branches named by code
        self.user = user
        self.created_at: float = created_at if created_at is not None else time.time()
        self.metadata: dict[str, Any] = dict(metadata or {})
        self.mailbox_size = mailbox_size
        if budget is not None and not isinstance(budget, Budget):
            raise TypeError(f"budget must be a pride.Budget or None, got {type(budget).__name__}")
        self.budget: Budget | None = budget
        """The allowance each of the branch's turns gets (None: no limit); settable,
        for turns that start after the change."""

        # The five managers (ADR-0016 D1).
        self._messages = History(messages or ())
        self._actions = ActionManager()
        self._chat_model = iModel.from_spec(chat_model)
        self._parse_model = (
            self._chat_model if parse_model is None else iModel.from_spec(parse_model)
        )
        self._logs = DataLogger(LogConfig.coerce(log_config), logs)
        self._operations = OperationManager()

        if tools is not None:
            self._actions.register(tools)
        system = system_message(system, system_datetime, use_lion_system_message, system_sender)
        if system is not None:
            self._messages.set_system(system)

        # Branch-scoped live extensions (created lazily).
        if memory is not None and not is_memory_store(memory):
            raise TypeError(
                f"memory must be a MemoryStore (store/retrieve/search), got {type(memory).__name__}"
            )
        self._memory: MemoryStore | None = memory
        self._providers: ContextProviderRegistry | None = None
        self._capabilities: CapabilityGrant | None = None
        self._message_listeners: tuple[Callable[[Branch, RoledMessage], None], ...] = ()
        self._rewrite_listeners: list[Callable[[Branch], None]] | None = None

        # The runtime (never serialised): mailbox, turns, session attachments.
        self._actor = Actor(self, observer)
        self._private: PrivateNursery | None = None  # while standalone (`async with`)

    def __repr__(self) -> str:
        state = "running" if self.running else "idle"
        return f"<Branch {self.name!r} {state}, {len(self._messages)} messages>"

    @property
    def name(self) -> str:
        """The branch's human name: sessions resolve it, stores key on it.

        Settable. A member's session re-indexes it under the new name, and
        refuses (``ValueError``) a name another of its members has.
        """
        return self._name

    @name.setter
    def name(self, value: str) -> None:
        wiring.rename(self._actor, value)  # the session's index first: it may refuse
        self._name = value

    # ------------------------------------------------------------ managers

    @property
    def messages(self) -> History:
        """The recorded conversation, in order (``len()``, iteration, indexing)."""
        return self._messages

    @property
    def msgs(self) -> History:
        """Alias of `messages` (the reference system's name)."""
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

    register_mcp = connecting.register_mcp  # an MCP server's tools: see connect.py

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
        """Write the logs as JSON lines to ``path`` (see `DataLogger.dump`)."""
        return self._logs.dump(path, clear=clear)

    @property
    def operations(self) -> OperationManager:
        """The branch's own named-operation registry.

        While the branch is attached, the session's registry stands behind it
        (``operations.shared``): lookups find the branch's names first.
        """
        return self._operations

    def register_operation(
        self, name: str, operation: Callable[..., Any], *, update: bool = False
    ) -> None:
        """Register ``async def operation(branch, **kwargs)`` under ``name``.

        Raises:
            ValueError: ``name`` is taken (unless ``update``) or shadows an attribute.
            TypeError: ``operation`` is not an async function.
        """
        if isinstance(name, str) and (
            hasattr(type(self), name) or name in getattr(self, "__dict__", ())
        ):
            raise ValueError(
                f"operation name {name!r} is a Branch attribute; lookup is attribute-first "
                "(get_operation, Call), so the operation could never be reached: pick another name"
            )
        self._operations.register(name, operation, update=update)

    def get_operation(self, name: str) -> Callable[..., Any] | None:
        """The operation called ``name``: a Branch attribute first, then the
        branch's own registry, then the session's (while attached); else None."""
        if hasattr(self, name):
            found: Callable[..., Any] = getattr(self, name)
            return found
        return self._operations.get(name)

    # ------------------------------------------------- branch-scoped extensions

    @property
    def memory(self) -> MemoryStore:
        """The branch's memory store (ADR-0016 D3); no setter.

        The store given to the constructor (kept by identity), else a session's
        default adopted on attachment, else a private `InMemoryStore`
        created on first access. Reading it claims it: a session attached
        later does not replace it. Never serialised, never cloned.
        """
        if self._memory is None:
            self._memory = InMemoryStore()
        return self._memory

    @property
    def providers(self) -> ContextProviderRegistry:
        """The context-provider registry, created on first access (falsy while empty)."""
        if self._providers is None:
            self._providers = ContextProviderRegistry()
        return self._providers

    @property
    def capabilities(self) -> CapabilityGrant | None:
        """The current capability grant, if any (see `grant_capabilities`)."""
        return self._capabilities

    # Structured outputs the branch may emit, observed (ADR-0016 D3): see grants.py.

    grant_capabilities = grants.grant_capabilities
    revoke_capabilities = grants.revoke_capabilities

    connect = connecting.connect

    # ------------------------------------------------ projection and cloning

    to_dict = projection.to_dict

    @classmethod
    def from_dict(
        cls,
        data: Mapping[str, Any],
        *,
        chat_model: iModel | None = None,
        parse_model: iModel | None = None,
        db_meta_key: str | None = None,
    ) -> Self:
        """A standalone branch from `to_dict` output; ``data`` is left unchanged.

        ``chat_model``/``parse_model`` replace the serialised models (which
        never carry a key: give one here, or set it in the environment). A
        top-level ``system`` is used only when the messages hold none. Tools,
        providers, memory, capabilities and operations are re-wired by code.

        Raises:
            InvalidMessage: naming every offending path.
        """
        return projection.from_dict(
            cls, data, chat_model=chat_model, parse_model=parse_model, db_meta_key=db_meta_key
        )

    def clone(self, sender: str | UUID | None = None) -> Branch:
        """A new branch with a copy of this conversation (ADR-0016 D5); not started.

        Messages get fresh ids, ``sender`` (default: this branch's id) as
        sender and the clone as recipient; tools, models and the budget carry
        over (a distinct parse model stays distinct); ``metadata["clone_from"]`` holds
        this branch's id, user, created_at and message ids. Logs, memory,
        providers, capabilities, operations and session wiring do not.
        Start it with ``async with`` or ``session.spawn``.

        Raises:
            TypeError: ``sender`` is not a str or UUID.
        """
        return projection.clone(self, sender, into=Branch)

    async def aclone(self, sender: str | UUID | None = None) -> Branch:
        """`clone`, after a checkpoint.

        Messages are recorded synchronously by the actor, so the copy is
        taken between two recordings, never in the middle of one.
        """
        await trio.lowlevel.checkpoint()
        return projection.clone(self, sender, into=Branch)

    # ------------------------------------------------------------ messages

    # Recording a message, and who hears of it: see recording.py.

    add_message = recording.add_message
    add_message_listener = recording.add_message_listener
    remove_message_listener = recording.remove_message_listener
    add_rewrite_listener = recording.add_rewrite_listener
    remove_rewrite_listener = recording.remove_rewrite_listener

    # ------------------------------------------------------------ signals

    def emit(self, signal: Signal) -> None:
        """Deliver ``signal`` to the attached observer.

        Inside a live turn its async subscribers are drained before the
        turn's terminal signal; outside one they run as best-effort
        background work of the actor.
        """
        wiring.emit(self._actor, signal)

    def fire_hook(self, point: str, payload: Mapping[str, Any]) -> None:
        """Fire a non-blocking hook point; async handlers join the turn's signal drain."""
        wiring.fire_hook(self._actor, point, payload)

    async def run_hook(self, point: str, payload: Mapping[str, Any]) -> None:
        """Run a hook point and wait for it; exceptions propagate (blocking points)."""
        await wiring.run_hook(self._actor, point, payload)

    @property
    def owner_id(self) -> UUID | None:
        """The id of the session this branch belongs to, if any."""
        return self._actor.owner_id

    # ------------------------------------------------------------- control

    # Out-of-band loop control (ADR-0018 D3): see control.py.

    control = controls.control
    poll_control = controls.poll_control

    @property
    def usage(self) -> Usage:
        """What the branch's turns (and ``Act`` items) have used so far, in this process.

        Counted as calls happen: a running turn's calls are in it already.
        """
        return self._actor.account.usage()

    @property
    def active_turn_id(self) -> UUID | None:
        """The id of the turn running now, if any."""
        state = self._actor.turn
        return state.context.turn_id if state is not None else None

    @property
    def last_context_report(self) -> Any:
        """The context-provider report of the last finished top-level turn.

        Published when that turn finalises (before its caller's ``ask``
        returns); None after a turn with no providers.
        """
        return self._actor.last_context_report

    # --------------------------------------------------------------- actor

    @property
    def actor(self) -> Actor:
        """The branch's actor: its mailbox, its turns and its session wiring (for supervisors)."""
        return self._actor

    @property
    def running(self) -> bool:
        """True while the branch's mailbox accepts commands."""
        return self._actor.running

    def mailbox_statistics(self) -> MailboxStatistics | None:
        """A snapshot of the mailbox, or None if the actor never started."""
        return self._actor.statistics()

    async def deliver(self, envelope: Reply) -> None:
        """Put ``envelope`` in the mailbox (the [`Target`][pride.Target] protocol).

        Work waits while the mailbox is full; priority commands never wait.
        Returns without a checkpoint when there was room (the send API
        checkpoints around it).

        Raises:
            BranchNotRunning: the actor was never started.
            BranchClosed: the branch has stopped.

        Cancellation: cancelled while waiting for room, nothing was queued.
        """
        mailbox = self._actor.require_mailbox()
        if envelope.command.lane == "priority":
            mailbox.put_priority(envelope)
            return
        if not mailbox.offer(envelope):  # room (mostly): queued without a coroutine
            await mailbox.put(envelope, checkpoint=False)

    def deliver_nowait(self, envelope: Reply) -> None:
        """Put ``envelope`` in the mailbox now (the [`Target`][pride.Target] protocol).

        Raises:
            MailboxFull: the work lane is full.
            BranchNotRunning, BranchClosed: as for `deliver`.
        """
        mailbox = self._actor.require_mailbox()
        if envelope.command.lane == "priority":
            mailbox.put_priority(envelope)
        else:
            mailbox.put_nowait(envelope)

    async def serve(
        self, host: trio.Nursery | None = None, *, task_status: Any = trio.TASK_STATUS_IGNORED
    ) -> StopReason:
        """Run this branch's actor in the calling task until it is stopped.

        For supervisors: ``await nursery.start(branch.serve)`` returns once the
        actor accepts commands. Pass a ``host`` nursery that outlives the actor
        (``nursery.start(branch.serve, nursery)``) to run the turns' nested
        work in it instead of a nursery of the actor's own (lighter for many
        idle branches). Returns the stop reason.
        """
        return await self._actor.serve(host, task_status=task_status)

    async def __aenter__(self) -> Self:
        """Run the branch standalone: its actor in a nursery of its own (standalone.py)."""
        await standalone.start(self)
        return self

    async def __aexit__(self, *exc_info: Any) -> bool:
        try:
            return await standalone.stop(self, exc_info)
        finally:
            exc_info = ()  # an error leaving holds this frame: no cycle through it

    # ------------------------------------------- kept for the existing tests

    @property
    def _active_turn(self) -> turn.TurnExecutionContext | None:
        state = self._actor.turn
        return state.context if state is not None else None

    @property
    def _last_context_report(self) -> Any:
        return self._actor.last_context_report

    @_last_context_report.setter
    def _last_context_report(self, value: Any) -> None:
        self._actor.last_context_report = value

    @property
    def _waiting_on(self) -> dict[Any, int]:
        return waits.waiting_on(self)

    # --------------------------------------------------------------- verbs

    # Each verb's parameters are its command's (plus ``timeout``): see facade.py.

    chat = verb(cmd.Chat)
    """One model call over the history; records nothing (see [`Chat`][pride.Chat])."""
    chat_and_record = verb(cmd.ChatAndRecord)
    """Chat, then record the instruction and response ([`ChatAndRecord`][pride.ChatAndRecord])."""
    communicate = verb(cmd.Communicate)
    """Chat, record both messages, optionally parse (see [`Communicate`][pride.Communicate])."""
    operate = verb(cmd.Operate)
    """A structured turn with optional tool actions (see [`Operate`][pride.Operate])."""
    parse = verb(cmd.Parse)
    """Parse text into a response format (see [`Parse`][pride.Parse])."""
    interpret = verb(cmd.Interpret)
    """Rewrite raw input into a clearer prompt (see [`Interpret`][pride.Interpret])."""
    act = first_converted(cmd.Act, action_calls, "action_request")
    """Execute tool calls and record them (see [`Act`][pride.Act]).

    ``action_request`` is one call or a list of calls, each an
    [`ActionCall`][pride.ActionCall], a ``{"function", "arguments"}`` dict, or a
    tool-call object with ``name``/``arguments``.
    """
    ReAct = verb(cmd.ReAct)
    """Think-act-observe, then answer (see [`ReAct`][pride.ReAct])."""
    ReActStream = stream_verb(cmd.ReActStream)
    """``async with branch.ReActStream(...) as rounds:`` ([`ReActStream`][pride.ReActStream])."""
    run = stream_verb(cmd.Run)
    """``async with branch.run(...) as items:`` (see [`Run`][pride.Run])."""
    call = verb(cmd.Call)
    """Run a registered operation as a turn (see [`Call`][pride.Call])."""
    resume = verb(cmd.Resume)
    """Continue this branch's turn that stopped for approval or was interrupted by a
    crash (see [`Resume`][pride.Resume]; a session's ``resolve`` finds the branch
    for you)."""


if TYPE_CHECKING:

    def _implements_target(branch: Branch) -> Target:
        return branch  # mypy checks here that Branch implements the Target protocol
